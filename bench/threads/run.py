"""Ranks that share a host: step time at -np 2 with TensorFlow's default
thread pools, with tfmpi's per-rank sizing (TFMPI_THREADS=auto, the default)
and with binding (TFMPI_BIND_CORES=1), against one process using every core:
a plain one, and `tfmpirun -np 1` (one rank: no collective, but the fused
optimizer update, which a plain process does not get). Every configuration
runs --rounds times, interleaved, and the median of the runs' median step times
is reported, with its ratio to the faster of the two 1-process figures; the
N-rank runs use equal work shares (TFMPI_SHARES=equal) so that only the thread
pools differ. Prints a Markdown table.

    python bench/threads/run.py [--models mlp,cnn,lstm] [--steps 60] [--np 2] [--rounds 3]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from step_timing import job_command, step_ms  # noqa: E402

CONFIGS = [
    # (label, ranks under tfmpirun: None for a plain process, "N" for --np, environment)
    ("1 process, all cores", None, {}),
    ("tfmpirun -np 1, all cores", 1, {}),
    ("tfmpirun, TF default pools", "N", {"TFMPI_THREADS": "off"}),
    ("tfmpirun, pools sized per rank (default)", "N", {}),
    ("tfmpirun, sized and bound", "N", {"TFMPI_BIND_CORES": "1"}),
]
ONE_PROCESS = 2  # the first two configurations


def run(model, np_, steps, ranks, env):
    cmd = job_command(model, steps)
    if ranks is not None:
        cmd = ["tfmpirun", "-np", str(np_ if ranks == "N" else ranks)] + cmd
    return step_ms(cmd, {"TFMPI_SHARES": "equal", **env})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn,lstm")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; -np {args.np}; ms per step (median of {args.rounds} runs), "
          "ratio to the faster 1-process figure\n")
    print("| model | " + " | ".join(label for label, _, _ in CONFIGS) + " |")
    print("|---" * (len(CONFIGS) + 1) + "|")
    for model in args.models.split(","):
        runs = [[] for _ in CONFIGS]
        for _ in range(args.rounds):
            for i, (_, launcher, env) in enumerate(CONFIGS):
                runs[i].append(run(model, args.np, args.steps, launcher, env))
        times = [statistics.median(r) for r in runs]
        best = min(times[:ONE_PROCESS])
        cells = [f"{t:.1f}" for t in times[:ONE_PROCESS]]
        cells += [f"{t:.1f} ({t / best:.2f}x)" for t in times[ONE_PROCESS:]]
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)


main()
