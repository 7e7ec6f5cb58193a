"""Input-bound training with and without sharded input (docs/performance.md,
"Input-bound training"). One command, one run, configurations interleaved:

    python bench/input/run.py [--images 1024] [--repeats 1]

Runs bench/input/train.py (PNG decoding in a tf.data map, a tiny model) as:
1 process with 1 thread; 1 process with one thread per core (the best
1-process configuration); `tfmpirun -np 2`, 1 thread per rank, with sharded
input (the default), with adaptive and with equal work shares; the same with
TFMPI_INPUT_SHARDING=0 (every rank decodes every sample and keeps its half).
Where the machine has 2 CPUs or more, also one core per process: 1 process
held to CPU 0 (taskset) against `tfmpirun -np 2` with TFMPI_BIND_CORES=1
(each rank on its own CPU). A process of "1 thread" still runs tf.data's
thread beside TensorFlow's, so unbound it uses more than one core: the bound
pair says what a second core buys.
Prints samples/s and the ratios.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
RATE = re.compile(r"([0-9.]+) samples/s")


def run(cmd, env, timeout=1200):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env})
    m = RATE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise SystemExit(f"bench: {' '.join(cmd)} failed:\n{r.stdout[-3000:]}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    cores = os.cpu_count() or 1
    script = [sys.executable, TRAIN, "--images", str(args.images)]
    configs = {
        "1 process, 1 thread": (script + ["--threads", "1"], {}),
        f"1 process, {cores} threads": (script + ["--threads", str(cores)], {}),
        "tfmpirun -np 2, sharded input": (["tfmpirun", "-np", "2"] + script + ["--threads", "1"], {}),
        "tfmpirun -np 2, sharded input, TFMPI_SHARES=equal": (
            ["tfmpirun", "-np", "2"] + script + ["--threads", "1"], {"TFMPI_SHARES": "equal"}),
        "tfmpirun -np 2, TFMPI_INPUT_SHARDING=0": (["tfmpirun", "-np", "2"] + script +
                                                   ["--threads", "1"], {"TFMPI_INPUT_SHARDING": "0"}),
    }
    bound = cores >= 2 and shutil.which("taskset")
    if bound:
        configs["1 process, 1 thread, on 1 core (taskset -c 0)"] = (
            ["taskset", "-c", "0"] + script + ["--threads", "1"], {})
        configs["tfmpirun -np 2, sharded input, TFMPI_BIND_CORES=1 (1 core per rank)"] = (
            ["tfmpirun", "-np", "2"] + script + ["--threads", "1"], {"TFMPI_BIND_CORES": "1"})
    rates = {name: [] for name in configs}
    for i in range(args.repeats):
        for name, (cmd, env) in configs.items():
            rates[name].append(run(cmd, env))
            print(f"[{i + 1}/{args.repeats}] {name}: {rates[name][-1]:.1f} samples/s",
                  file=sys.stderr, flush=True)
    rate = {name: statistics.median(v) for name, v in rates.items()}
    one, best = rate["1 process, 1 thread"], rate[f"1 process, {cores} threads"]
    print("| configuration | samples/s | vs 1 process, 1 thread | vs best 1 process |")
    print("|---|---|---|---|")
    for name, r in rate.items():
        print(f"| {name} | {r:.1f} | {r / one:.2f}x | {r / best:.2f}x |")
    if bound:
        names = list(configs)[-2:]
        print(f"\none core per process: -np 2 / 1 process = "
              f"{rate[names[1]] / rate[names[0]]:.2f}x")


if __name__ == "__main__":
    main()
