"""The sharded optimizer update against the full update on every rank (not a test).

    python bench/sharded_update.py [--models mlp,cnn,mlp12m,mlp42m] [--np 2,4] [--repeats 1]

Runs bench/step_job.py (model.fit with Adam, synthetic data, fixed global
batch) under `tfmpirun -np N` with TFMPI_SHARDED_UPDATE=0 and =1, the two
interleaved, and prints the median step times and the paired ratios
sharded / full (below 1: the sharded update is faster). Note [Sharded
update], python/tfmpi/transparent/sharded_update.py.
"""

import argparse
import os
import re
import statistics
import sys

from training_bench import run

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_job.py")
STEP_MS = re.compile(r"^STEP_MS ([0-9.]+)", re.M)
STEPS = {"tiny": 80, "mlp": 60, "cnn": 60, "lstm": 40, "mlp12m": 30, "mlp42m": 20}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,cnn,mlp12m,mlp42m")
    p.add_argument("--np", default="2,4", dest="sizes")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    models = args.models.split(",")
    sizes = [int(n) for n in args.sizes.split(",")]
    if args.repeats < 1 or any(m not in STEPS for m in models) or any(n < 2 for n in sizes):
        p.error(f"models from {', '.join(STEPS)}, sizes of at least 2 ranks, --repeats >= 1")
    rows = []
    for model in models:
        for n in sizes:
            times = {"0": [], "1": []}
            for i in range(args.repeats):
                for mode in ("0", "1"):
                    os.environ["TFMPI_SHARDED_UPDATE"] = mode
                    cmd = ["tfmpirun", "-np", str(n), sys.executable, JOB, model,
                           "--steps", str(STEPS[model])]
                    times[mode].append(run(cmd, timeout=1800, figure=STEP_MS))
                    print(f"{model} -np {n} repeat {i + 1}, TFMPI_SHARDED_UPDATE={mode}: "
                          f"{times[mode][-1]:.1f} ms per step", flush=True)
            ratios = [s / f for s, f in zip(times["1"], times["0"])]
            rows.append((model, n, statistics.median(times["0"]), statistics.median(times["1"]),
                         statistics.median(ratios)))
    print("\n| model | ranks | full update (ms/step) | sharded (ms/step) | sharded / full |")
    print("|---|---|---|---|---|")
    for model, n, full, sharded, ratio in rows:
        print(f"| {model} | {n} | {full:.1f} | {sharded:.1f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
