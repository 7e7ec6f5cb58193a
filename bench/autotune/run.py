"""What TFMPI_AUTOTUNE finds, and whether it pays: one training job under
`tfmpirun -np N` with TFMPI_AUTOTUNE=1 (the search's windows are read back
from TFMPI_AUTOTUNE_LOG and summarised per point: median GB/s of the engine's
execution), then, if the search left the defaults, the defaults and the tuned
settings timed interleaved over --rounds runs of --steps steps each. With
--hosts, the ranks run one per emulated host (network namespaces joined by TCP,
one core each, optionally --bandwidth Mbit/s links; needs root: tests/cluster).
One command:

    python bench/autotune/run.py [--model mlp42m] [--np 2] [--tune-steps 260]
                                 [--steps 30] [--rounds 3] [--hosts] [--bandwidth MBIT]

Prints Markdown tables (docs/performance.md, "Autotune").
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import where  # noqa: E402
from step_timing import interleaved_medians, job_command  # noqa: E402

SETTINGS = ("message_elements", "direct_threshold", "fusion_threshold")
VARIABLES = {"message_elements": "TFMPI_MAX_MESSAGE_ELEMENTS",
             "direct_threshold": "TFMPI_DIRECT_THRESHOLD",
             "fusion_threshold": "TFMPI_FUSION_THRESHOLD"}


def tune(args, launcher, log):
    """Runs the tuning job; returns (its output lines about autotune, STEP_MS)."""
    cmd = launcher + job_command(args.model, args.tune_steps)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TFMPI_SHARES": "equal",
           "TFMPI_AUTOTUNE": "1", "TFMPI_AUTOTUNE_LOG": log}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    out = r.stdout + r.stderr
    step = re.search(r"^STEP_MS ([0-9.]+)", r.stdout, re.M)
    if r.returncode != 0 or not step:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{out[-3000:]}")
    return [line for line in out.splitlines() if "autotune:" in line], float(step.group(1))


def summarise(rows):
    """[(phase, point, [GB/s per window], [busy cycles per window])], in the
    order the points were first measured."""
    points = {}
    for row in rows:
        key = (row["phase"], tuple(int(row[s]) for s in SETTINGS))
        speeds, cycles = points.setdefault(key, ([], []))
        speeds.append(float(row["gb_per_s"]))
        cycles.append(int(row["cycles"]))
    return [(phase, point, speeds, cycles) for (phase, point), (speeds, cycles) in points.items()]


def env_of(point):
    return {VARIABLES[s]: str(v) for s, v in zip(SETTINGS, point)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp42m")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--tune-steps", type=int, default=260,
                        help="steps of the tuning job (the search needs about 230 busy cycles)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    where.add_arguments(parser)
    args = parser.parse_args()
    with where.placement(parser, args) as (tfmpirun, _, description):
        run(args, tfmpirun, description)


def run(args, launcher, description):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "autotune.csv")
        lines, tuning_step = tune(args, launcher, log)
        with open(log) as f:
            rows = list(csv.DictReader(f))
    print(f"{os.cpu_count()} CPUs; {args.model}, tfmpirun -np {args.np}, {description}; "
          f"the tuning job ({args.tune_steps} steps): median step {tuning_step:.1f} ms\n")
    for line in lines:
        print(f"    {line.strip()}")
    print("\n| phase | message elements | direct threshold | fusion threshold | busy cycles "
          "| windows (GB/s) | median GB/s |\n|---|---|---|---|---|---|---|")
    for phase, point, speeds, cycles in summarise(rows):
        print(f"| {phase} | {point[0]} | {point[1]} | {point[2]} | {sum(cycles)} | "
              f"{', '.join(f'{s:.2f}' for s in speeds)} | {statistics.median(speeds):.2f} |")
    if not rows:
        print("\nThe search measured no window (every candidate ran the same calls, or too few "
              "steps).")
        return
    # What the search cost: each window's execution time beyond what its bytes
    # take at the starting point's median speed.
    start_speed = statistics.median(summarise(rows)[0][2]) * 1e9
    extra = sum(float(r["seconds"]) - float(r["bytes"]) / start_speed for r in rows)
    print(f"\nExecution time of the {len(rows)} windows beyond the starting point's speed: "
          f"{extra:+.2f} s in all (the tuning job ran {args.tune_steps} steps)")
    done = [line for line in lines if "autotune: done" in line or "autotune: stopped" in line]
    if not done:
        print("\nThe search did not finish; use more --tune-steps.")
        return
    if "kept the defaults" in done[-1]:
        print("\nThe search kept the defaults: nothing to compare.")
        return
    first = tuple(int(rows[0][s]) for s in SETTINGS)
    m = re.search(r"message (\d+) elements, direct (\d+) (KiB|MiB|B), fusion (\d+) (KiB|MiB|B)",
                  done[-1])
    unit = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}
    tuned = (int(m.group(1)), int(m.group(2)) * unit[m.group(3)], int(m.group(4)) * unit[m.group(5)])
    job = launcher + job_command(args.model, args.steps)
    configs = [("defaults", job, {**env_of(first), "TFMPI_SHARES": "equal"}),
               ("tuned", job, {**env_of(tuned), "TFMPI_SHARES": "equal"})]
    result = interleaved_medians(configs, args.rounds, digits=1)
    base = result["defaults"][0]
    print(f"\n| settings | ms per step (median of {args.rounds} runs) | runs | speed |\n"
          "|---|---|---|---|")
    for (label, _, env), (med, runs) in zip(configs, result.values()):
        print(f"| {label} ({', '.join(f'{k}={v}' for k, v in env.items() if k != 'TFMPI_SHARES')}) "
              f"| {med:.1f} | {', '.join(f'{x:.0f}' for x in runs)} | {base / med:.2f}x |")


if __name__ == "__main__":
    main()
