"""Overhead benchmark (not a test): step time of `tfmpirun -np 1 python SCRIPT`
against plain `python SCRIPT`, on examples/resnet50_synthetic.py, with enough
alternating pairs to resolve a few per cent on a noisy machine.

    python bench/overhead_bench.py [--pairs 20] [--threads 1] [--image-size 64]

Each pair runs both commands back to back (which goes first alternates), so
drift of the machine's speed cancels in the pair's ratio. A run's step time is
the median over its timed steps (a burst of load from another tenant moves it
less than the mean). Prints every run, the median of the paired step-time
ratios with a distribution-free 95% confidence interval (order statistics of
the binomial), and the median extra wall time of a whole run (start-up: MPI
initialisation and the import hooks).
"""

import argparse
import math
import re
import statistics
import sys
import time

from training_bench import EXAMPLE, run

STEP = re.compile(r"median step ([0-9.]+) ms")


def median_interval(values, level=0.95):
    """(low, high): order statistics that hold the median with >= level probability."""
    xs = sorted(values)
    n = len(xs)
    tail = (1 - level) / 2
    k, below = 0, 0.0  # largest k with P(Binomial(n, 1/2) < k) <= tail
    while below + math.comb(n, k) / 2 ** n <= tail:
        below += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        raise SystemExit(f"{n} pairs are too few for a {level:.0%} interval; use --pairs 8 or more")
    return xs[k - 1], xs[n - k]


def timed(cmd):
    """(median step time in ms, wall time of the whole run in s)."""
    start = time.perf_counter()
    step = run(cmd, timeout=1200, figure=STEP)
    return step, time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of both commands")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=25, help="steps per run, 5 of them untimed")
    a = p.parse_args()
    model = [sys.executable, EXAMPLE, "--batch-size", str(a.batch_size), "--steps", str(a.steps),
             "--image-size", str(a.image_size), "--threads", str(a.threads), "--warmup", "5"]
    commands = {"python": model, "tfmpirun -np 1": ["tfmpirun", "-np", "1"] + model}
    ratios, extra_wall = [], []
    for i in range(a.pairs):
        order = list(commands) if i % 2 == 0 else list(commands)[::-1]
        got = {name: timed(commands[name]) for name in order}
        (step_py, wall_py), (step_t, wall_t) = got["python"], got["tfmpirun -np 1"]
        ratios.append(step_t / step_py)
        extra_wall.append(wall_t - wall_py)
        print(f"[{i + 1}/{a.pairs}] median step: python {step_py:.1f} ms (run {wall_py:.1f} s), "
              f"tfmpirun -np 1 {step_t:.1f} ms (run {wall_t:.1f} s), ratio {ratios[-1]:.4f}",
              flush=True)
    low, high = median_interval(ratios)
    mid = statistics.median(ratios)
    print(f"\nstep time of tfmpirun -np 1 vs python: {(mid - 1) * 100:+.2f}% "
          f"(95% interval {(low - 1) * 100:+.2f}% .. {(high - 1) * 100:+.2f}%, {a.pairs} pairs)")
    print(f"extra wall time per run (start-up and shutdown): {statistics.median(extra_wall):+.2f} s "
          "(median)")


if __name__ == "__main__":
    main()
