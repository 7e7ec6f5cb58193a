"""Rank script of bench/scaling/run.py: times tfmpi allreduces (sum, float32,
through the numpy API, so negotiation and the engine are included) at sizes
from 4 KiB to 64 MiB, and the host's own summing speed (numpy, the same work
as MPI_SUM). Rank 0 prints one line: CALIBRATION <json>.

    tfmpirun -np 2 python bench/scaling/calibrate.py [--reps 9]
"""

import argparse
import json
import statistics
import time

import numpy as np

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def summing_seconds_per_byte(nbytes=64 << 20, reps=5):
    a = np.ones(nbytes // 4, np.float32)
    b = np.ones_like(a)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.add(a, b, out=a)
        times.append(time.perf_counter() - t0)
    return min(times) / nbytes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    import tfmpi
    tfmpi.init()
    points = []
    for nbytes in SIZES:
        x = np.ones(nbytes // 4, np.float32)
        name = f"calibrate/{nbytes}"
        for _ in range(3):  # warm-up: the first call negotiates in full, later ones hit the cache
            tfmpi.allreduce(x, op="sum", name=name)
        times = []
        for _ in range(args.reps):
            tfmpi.barrier()
            t0 = time.perf_counter()
            tfmpi.allreduce(x, op="sum", name=name)
            times.append(time.perf_counter() - t0)
        slowest = tfmpi.allreduce(np.array([statistics.median(times)]), op="max",
                                  name=f"calibrate/time/{nbytes}")
        points.append([nbytes, float(slowest[0])])
    gamma = summing_seconds_per_byte()
    if tfmpi.rank() == 0:
        print("CALIBRATION " + json.dumps({"ranks": tfmpi.size(), "points": points,
                                           "gamma": gamma}), flush=True)
    tfmpi.shutdown()


main()
