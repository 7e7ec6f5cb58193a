"""Transparent-training benchmark (not a test): runs examples/resnet50_synthetic.py
in configurations compared in one run, interleaved, and prints ratios.

    python bench/training_bench.py [--repeats 3] [--batch-size 16] [--steps 12]

1. Overhead: `tfmpirun -np 1 python ...` vs plain `python ...` (same threads).
2. Scaling: `tfmpirun -np 2` with 1 intra-op thread per rank vs `-np 1` with 1
   thread, in global-batch mode (each rank takes half of every batch) and in
   per-rank mode (each rank takes whole batches); against -np 1 as Keras runs it
   (XLA on, "auto") and against -np 1 without XLA (multi-rank runs can't use it).
3. The ceiling for 2: two plain, independent `python` processes (1 thread each,
   no XLA, no communication) run at the same time on batches of B/2 and of B.
   Their summed rate over twice the 1-process rate is the scaling this machine
   allows before any communication; tfmpirun's 2-rank rate over that sum is
   what tfmpi costs.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "resnet50_synthetic.py")
RATE = re.compile(r"([0-9.]+) images/s")


def run(cmd, timeout, figure=RATE):
    """The number `figure` finds in the output of cmd (images/s by default)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env=env)
    m = figure.search(r.stdout)
    if r.returncode != 0 or not m:
        raise SystemExit(f"benchmark run failed: {' '.join(cmd)}\n{r.stdout[-3000:]}")
    return float(m.group(1))


def run_concurrent(cmd, copies, timeout):
    """Summed rate of `copies` independent runs of cmd started together."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env) for _ in range(copies)]
    total = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        m = RATE.search(out)
        if p.returncode != 0 or not m:
            raise SystemExit(f"benchmark run failed: {' '.join(cmd)}\n{out[-3000:]}")
        total += float(m.group(1))
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--image-size", type=int, default=128)
    a = p.parse_args()
    model = [EXAMPLE, "--batch-size", str(a.batch_size), "--steps", str(a.steps),
             "--image-size", str(a.image_size)]
    py = sys.executable
    configs = {
        "python, 2 threads": [py] + model + ["--threads", "2"],
        "tfmpirun -np 1, 2 threads": ["tfmpirun", "-np", "1", py] + model + ["--threads", "2"],
        "tfmpirun -np 1, 1 thread": ["tfmpirun", "-np", "1", py] + model + ["--threads", "1"],
        # Multi-rank runs can't use XLA (tfmpi's ops have no XLA kernels); this
        # is the like-for-like single-rank baseline for them.
        "tfmpirun -np 1, 1 thread, no XLA":
            ["tfmpirun", "-np", "1", py] + model + ["--threads", "1", "--jit", "off"],
        "tfmpirun -np 2, 1 thread/rank, global batch":
            ["tfmpirun", "-np", "2", py] + model + ["--threads", "1"],
        # Per-rank: each rank runs half the script's steps, each on a whole batch;
        # the script counts its own rank's images, so the rate is scaled by 2 below.
        "tfmpirun -np 2, 1 thread/rank, per-rank batch":
            ["tfmpirun", "-np", "2", "--batch-mode", "per-rank", py] + model[:-4]
            + ["--steps", str(2 * a.steps), "--image-size", str(a.image_size), "--threads", "1"],
    }
    solo = [py, EXAMPLE, "--steps", str(a.steps), "--image-size", str(a.image_size),
            "--threads", "1", "--jit", "off"]
    concurrent = {  # name -> command run twice at once (hardware ceiling, no communication)
        "2 x python at once, 1 thread, batch B/2": solo + ["--batch-size", str(a.batch_size // 2)],
        "2 x python at once, 1 thread, batch B": solo + ["--batch-size", str(a.batch_size)],
    }
    scale = {k: (2.0 if "per-rank" in k else 1.0) for k in configs}
    rates = {k: [] for k in list(configs) + list(concurrent)}
    for rep in range(a.repeats):
        for name, cmd in list(configs.items()) + list(concurrent.items()):  # interleaved
            if name in concurrent:
                rates[name].append(run_concurrent(cmd, 2, timeout=1200))
            else:
                rates[name].append(run(cmd, timeout=1200) * scale[name])
            print(f"[{rep + 1}/{a.repeats}] {name}: {rates[name][-1]:.2f} images/s", flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("\nmedian images/s (global throughput):")
    for k, v in med.items():
        print(f"  {k:48s} {v:8.2f}")

    # Each figure below is the median over repeats of a ratio between runs of
    # the same repeat (run minutes apart, not hours): drift on a shared machine
    # cancels better than in a ratio of medians.
    def paired(num, den, factor=1.0):
        return statistics.median(n / (factor * d) for n, d in zip(rates[num], rates[den]))

    overhead = 1 - paired("tfmpirun -np 1, 2 threads", "python, 2 threads")
    print(f"\noverhead of tfmpirun -np 1 vs python: {overhead * 100:+.1f}% step time")
    for base in ("tfmpirun -np 1, 1 thread", "tfmpirun -np 1, 1 thread, no XLA"):
        for mode in ("global batch", "per-rank batch"):
            eff = paired(f"tfmpirun -np 2, 1 thread/rank, {mode}", base, 2.0)
            print(f"scaling efficiency at -np 2 ({mode}) vs '{base}': {eff * 100:.1f}%")
    for mode, ceiling in (("global batch", "2 x python at once, 1 thread, batch B/2"),
                          ("per-rank batch", "2 x python at once, 1 thread, batch B")):
        allowed = paired(ceiling, "tfmpirun -np 1, 1 thread, no XLA", 2.0)
        reached = paired(f"tfmpirun -np 2, 1 thread/rank, {mode}", ceiling)
        print(f"{mode}: the machine allows {allowed * 100:.1f}% without communication; "
              f"tfmpirun -np 2 reaches {reached * 100:.1f}% of that")


if __name__ == "__main__":
    main()
