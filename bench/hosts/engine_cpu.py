"""The engine thread's CPU per allreduce across two emulated hosts: what a
collective costs a rank besides its wall time (needs root: tests/cluster).

    python bench/hosts/engine_cpu.py [--ops 300]

Each rank busy-waits 16 ms (a step's compute) plus, with jitter, a random 0-4 ms
(so one rank often reaches the collective first and waits for the other), then
allreduces a buffer of 1 float (negotiation only) or 315,000 floats (the
gradients of bench/step_job.py's CNN) through the numpy API. Prints, for each
case, the tfmpi-engine thread's CPU ms per allreduce, the wall ms per
iteration and the engine's negotiation cycles per allreduce on rank 0 (one
run; hosts of one core each).
"""

import argparse
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from thread_cpu import thread_stat  # noqa: E402

COMPUTE_S = 0.016


def engine_cpu_seconds():
    total = 0.0
    for tid in os.listdir("/proc/self/task"):
        try:
            name, _, cpu = thread_stat(f"/proc/self/task/{tid}/stat")
        except FileNotFoundError:  # the thread ended
            continue
        if name == "tfmpi-engine":
            total += cpu
    return total


def rank_main(elements, jitter, ops):
    import numpy as np
    import tfmpi
    tfmpi.init()
    x = np.ones(elements, np.float32)
    for _ in range(5):
        tfmpi.allreduce(x, name="w")
    random.seed(tfmpi.rank())
    cycles0 = tfmpi.engine_stats()["cycles"]
    cpu0, t0 = engine_cpu_seconds(), time.perf_counter()
    for _ in range(ops):
        end = time.perf_counter() + COMPUTE_S + random.random() * jitter
        while time.perf_counter() < end:
            pass
        tfmpi.allreduce(x, name="w")
    cpu1, t1 = engine_cpu_seconds(), time.perf_counter()
    cycles = (tfmpi.engine_stats()["cycles"] - cycles0) / ops
    if tfmpi.rank() == 0:
        print(f"RESULT {1000 * (cpu1 - cpu0) / ops:.2f} {1000 * (t1 - t0) / ops:.2f} {cycles:.2f}",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--rank", nargs=2, metavar=("ELEMENTS", "JITTER_S"), help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.rank:
        return rank_main(int(a.rank[0]), float(a.rank[1]), a.ops)
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))
    import harness
    print("| allreduce of | peer jitter | engine CPU per allreduce (ms) | wall per iteration (ms) "
          "| engine cycles per allreduce |")
    print("|---|---|---|---|---|")
    with harness.EmulatedCluster(hosts=2, cpu_quota=1.0) as cluster:
        for elements in (1, 315000):
            for jitter in (0.0, 0.004):
                cmd = ["tfmpirun", "-np", "2", *cluster.tfmpirun_args(), sys.executable,
                       os.path.abspath(__file__), "--ops", str(a.ops), "--rank", str(elements),
                       str(jitter)]
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
                if r.returncode != 0 or not lines:
                    raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n"
                                     f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
                cpu, wall, cycles = lines[0].split()[1:]
                print(f"| {elements:,} floats | {'0-4 ms' if jitter else 'none'} | {cpu} | {wall} "
                      f"| {cycles} |", flush=True)


if __name__ == "__main__":
    main()
