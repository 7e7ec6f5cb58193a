"""Scaling model (docs/scaling.md): calibrates the
alpha-beta model of bench/scaling/model.py on this machine, checks it against
2-rank runs made here, and projects scaling efficiency for ResNet-50 and
ResNet-101 at 8 to 1,024 ranks on 25 Gbit/s, 100 Gbit/s and InfiniBand HDR
links, next to Horovod's published figure. Prints Markdown tables and writes
a PNG.

    python bench/scaling/run.py [--rounds 2] [--steps 30] [--png docs/img/scaling_model.png]
        [--skip-check]      # ~4 min with the check on 2 cores, ~1 min without
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import model  # noqa: E402
from step_timing import interleaved_medians, job_command  # noqa: E402

# Line rates at 90% efficiency; latencies are typical MPI small-message
# latencies for each kind of network (assumptions, stated in the docs).
LINKS = [
    model.Link("25 Gbit/s RoCE", 5e-6, 0.9 * 25e9 / 8),
    model.Link("100 Gbit/s RoCE", 3e-6, 0.9 * 100e9 / 8),
    model.Link("InfiniBand HDR (200 Gbit/s)", 1.5e-6, 0.9 * 200e9 / 8),
]
# Horovod's benchmark page: 128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE,
# tf_cnn_benchmarks ResNet-101 at batch 64 per GPU, 90% scaling efficiency;
# its 16-GPU example run prints "total images/sec: 1656.82" (103.6 per GPU).
P100_RESNET101_STEP_S = 64 / (1656.82 / 16)
# ResNet-50 needs about half the FLOPs of ResNet-101 per image (3.8 against
# 7.6 GFLOPs, He et al. 2016, Table 1).
FLOPS_RATIO_50_TO_101 = 3.8 / 7.6
FASTER_GPU = 8  # a current GPU with mixed precision, assumed 8x a P100 in fp32
RANKS = [8, 16, 32, 64, 128, 256, 512, 1024]
DIRECT_BYTES = 1 << 20  # TFMPI_DIRECT_THRESHOLD: bigger tensors go alone
FIXED_COST_S = 0.65e-3  # tfmpi's fixed cost per step at -np 2 (docs, "The fixed cost of a step")


def calibrate_here():
    cmd = ["tfmpirun", "-np", "2", sys.executable, os.path.join(HERE, "calibrate.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    m = re.search(r"^CALIBRATION (.*)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise SystemExit(f"calibration failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    data = json.loads(m.group(1))
    link = model.calibrate(data["points"], data["ranks"], data["gamma"])
    return data, model.Link("this machine, 2 ranks, shared memory", link.alpha_s, link.bytes_per_s)


def gradients(build):
    """(bytes of trainable float32 weights, collectives per step) of a model."""
    import numpy as np
    m = build()
    sizes = [int(np.prod(w.shape)) * 4 for w in m.trainable_weights]
    direct = sum(1 for s in sizes if s >= DIRECT_BYTES)
    return sum(sizes), direct + (1 if len(sizes) > direct else 0)


def check(link, gamma, rounds, steps):
    """Per model: (bytes, per-rank compute ms, predicted -np 2 ms, measured ms)."""
    import step_job
    rows = []
    for name in ("mlp42m", "cnn"):
        batch, _, build = step_job.MODELS[name]
        nbytes, collectives = gradients(build)
        half = job_command(name, steps) + ["--batch", str(batch // 2)]
        configs = [("compute", ["taskset", "-c", "0"] + half, {}),
                   ("np2", ["tfmpirun", "-np", "2"] + job_command(name, steps),
                    {"TFMPI_SHARES": "equal"})]
        runs = interleaved_medians(configs, rounds)
        compute_ms = runs["compute"][0]
        predicted = 1e3 * model.step_s(compute_ms / 1e3, nbytes, 2, link, gamma=gamma,
                                       fixed_s=FIXED_COST_S, collectives=collectives)
        rows.append((name, nbytes, compute_ms, predicted) + runs["np2"])
    return rows


def projections(gamma):
    import keras
    apps = {"ResNet-50": keras.applications.ResNet50, "ResNet-101": keras.applications.ResNet101}
    grads = {n: gradients(lambda f=f: f(weights=None)) for n, f in apps.items()}
    compute = {"ResNet-101": P100_RESNET101_STEP_S,
               "ResNet-50": P100_RESNET101_STEP_S * FLOPS_RATIO_50_TO_101}
    table = {}
    for net, (nbytes, collectives) in grads.items():
        for gpu, speed in (("P100-class", 1), (f"{FASTER_GPU}x faster", FASTER_GPU)):
            for link in LINKS:
                for overlap in (False, True):
                    table[(net, gpu, link.name, overlap)] = [
                        model.efficiency(compute[net] / speed, nbytes, p, link, gamma=gamma,
                                         overlap=overlap, fixed_s=FIXED_COST_S,
                                         collectives=collectives) for p in RANKS]
    return grads, compute, table


def plot(table, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, gpu in zip(axes, ("P100-class", f"{FASTER_GPU}x faster")):
        for link, color in zip(LINKS, ("tab:red", "tab:blue", "tab:green")):
            for overlap, style in ((False, "-"), (True, "--")):
                eff = table[("ResNet-101", gpu, link.name, overlap)]
                ax.plot(RANKS, [100 * e for e in eff], style, color=color, marker="o", ms=3,
                        label=f"{link.name}, {'overlap' if overlap else 'no overlap'}")
        if gpu == "P100-class":
            ax.plot([512], [90], "k*", ms=12, label="Horovod, published (25 Gbit/s RoCE)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks (GPUs)")
        ax.set_title(f"ResNet-101, {gpu} compute per GPU")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("scaling efficiency (%)")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--png", default=os.path.join(HERE, "..", "..", "docs", "img",
                                                      "scaling_model.png"))
    parser.add_argument("--skip-check", action="store_true",
                        help="no 2-rank runs: calibrate and project only")
    args = parser.parse_args()

    data, here = calibrate_here()
    gamma = data["gamma"]
    print("## Calibration (tfmpirun -np 2, one host)\n")
    print("| bytes | measured ms | model ms |\n|---|---|---|")
    for n, t in data["points"]:
        print(f"| {n:,} | {1e3 * t:.3f} | {1e3 * model.allreduce_s(n, 2, here, gamma):.3f} |")
    print(f"\nalpha {1e6 * here.alpha_s:.1f} us, bandwidth {here.bytes_per_s / 1e9:.2f} GB/s, "
          f"summing {1 / gamma / 1e9:.2f} GB/s\n")

    if not args.skip_check:
        print(f"## Check: -np 2 on this machine (median of {args.rounds} runs)\n")
        print("| model | gradient MB | compute per rank (ms, 1 core, half batch) | predicted -np 2 (ms) "
              "| measured -np 2 (ms) | runs | measured / predicted |\n|---|---|---|---|---|---|---|")
        for name, nbytes, comp, pred, meas, runs in check(here, gamma, args.rounds, args.steps):
            print(f"| {name} | {nbytes / 1e6:.1f} | {comp:.1f} | {pred:.1f} | {meas:.1f} | "
                  f"{', '.join(f'{x:.0f}' for x in runs)} | {meas / pred:.2f} |")
        print()

    grads, compute, table = projections(gamma)
    for net, (nbytes, collectives) in grads.items():
        print(f"## {net}: {nbytes / 1e6:.1f} MB of gradients in {collectives} collectives; "
              f"P100-class step {1e3 * compute[net]:.0f} ms\n")
        print("| compute | link | overlap | " + " | ".join(str(p) for p in RANKS) + " |")
        print("|---|---|---|" + "---|" * len(RANKS))
        for (n, gpu, link, overlap), eff in table.items():
            if n == net:
                print(f"| {gpu} | {link} | {'backward' if overlap else 'none'} | "
                      + " | ".join(f"{100 * e:.0f}%" for e in eff) + " |")
        print()
    i = RANKS.index(512)
    none = table[("ResNet-101", "P100-class", LINKS[0].name, False)][i]
    over = table[("ResNet-101", "P100-class", LINKS[0].name, True)][i]
    print(f"Horovod, published: 90% (ResNet-101, 512 GPUs, 25 Gbit/s RoCE). Model: "
          f"{100 * none:.0f}% without overlap, {100 * over:.0f}% with the allreduce hidden "
          "behind the backward pass.")
    plot(table, args.png)
    print(f"\nplot: {os.path.relpath(args.png)}")


main()
