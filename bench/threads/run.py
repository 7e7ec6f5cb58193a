"""Ranks that share a host: step time at -np 2 with TensorFlow's default
thread pools, with tfmpi's per-rank sizing (TFMPI_THREADS=auto, the default)
and with binding (TFMPI_BIND_CORES=1), against one process using every core.
Every configuration runs --rounds times, interleaved, and the median of the
runs' median step times is reported; the 2-rank runs use equal work shares
(TFMPI_SHARES=equal) so that only the thread pools differ. Prints a Markdown
table.

    python bench/threads/run.py [--models mlp,cnn,lstm] [--steps 60] [--np 2] [--rounds 3]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from step_timing import job_command, step_ms  # noqa: E402

CONFIGS = [
    # (label, launcher prefix or None for 1 process, environment)
    ("1 process, all cores", None, {}),
    ("tfmpirun, TF default pools", True, {"TFMPI_THREADS": "off"}),
    ("tfmpirun, pools sized per rank (default)", True, {}),
    ("tfmpirun, sized and bound", True, {"TFMPI_BIND_CORES": "1"}),
]


def run(model, np_, steps, launcher, env):
    cmd = job_command(model, steps)
    if launcher:
        cmd = ["tfmpirun", "-np", str(np_)] + cmd
    return step_ms(cmd, {"TFMPI_SHARES": "equal", **env})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn,lstm")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; -np {args.np}; ms per step (median of {args.rounds} runs), "
          "ratio to 1 process\n")
    print("| model | " + " | ".join(label for label, _, _ in CONFIGS) + " |")
    print("|---" * (len(CONFIGS) + 1) + "|")
    for model in args.models.split(","):
        runs = [[] for _ in CONFIGS]
        for _ in range(args.rounds):
            for i, (_, launcher, env) in enumerate(CONFIGS):
                runs[i].append(run(model, args.np, args.steps, launcher, env))
        times = [statistics.median(r) for r in runs]
        cells = [f"{times[0]:.1f}"] + [f"{t:.1f} ({t / times[0]:.2f}x)" for t in times[1:]]
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)


main()
