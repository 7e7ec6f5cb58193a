"""Why a 2-rank run of Keras' bidirectional-LSTM example drifts away from the
1-process run: reduction-order rounding, amplified by training (not a tfmpi
difference). Runs bilstm_stand_in.py (Embedding -> 2 BiLSTM -> Dense, Adam,
batch 32, synthetic data it overfits) in float32 and float64 as:

  plain         python bilstm_stand_in.py                  (the reference)
  plain_again   the same again                             (run-to-run noise: must be 0)
  np2           tfmpirun -np 2 python bilstm_stand_in.py
  np2_again     the same again
  split         1 process, gradient of each half-batch combined as
                (s0/B) g0 + (s1/B) g1: the 2-rank arithmetic, no tfmpi
  perturb       1 process, one initial weight moved by 1 ulp
  split_dense   as split, Embedding gradient densified before combining
                (a real difference, for contrast: Keras 3's Adam squares the
                IndexedSlices rows before summing duplicates)

and prints, against plain of the same dtype: the first step whose batch loss
differs by more than 1e-6, 1e-3, 1e-1 (relative), the relative L2 distance of
all weights at selected steps, and each epoch's mean loss; also whether np2
and split are bitwise equal. All runs use op determinism, a fixed seed and one
intra-op thread per process.

    python bench/divergence/compare_runs.py [--out /tmp/tfmpi-divergence]
    python bench/divergence/compare_runs.py --out /tmp/tfmpi-divergence-4 \
        --variants plain,np2,split,perturb --ensemble 3 -- --epochs 4

The first takes about 10 minutes on a 2-core machine (14 training runs of
25-50 s, 2 epochs of 200 steps); `--ensemble K` adds K float32 runs, each with
a different weight moved by 1 ulp, and prints the spread of the epoch losses
over them (the second command: about 16 minutes, 4 epochs, where the training
loss gets down to ~0.003). Runs whose result file exists are not repeated
(--force reruns them); arguments after `--` go to every run. `--plot` needs
matplotlib.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "bilstm_stand_in.py")
VARIANTS = ["plain", "plain_again", "np2", "np2_again", "split", "perturb", "split_dense"]
THRESHOLDS = (1e-6, 1e-3, 1e-1)


def command(variant, floatx, out, extra):
    tag = f"{variant}-{floatx}"
    base = [SCRIPT, out, "--tag", tag, "--floatx", floatx] + extra
    if variant.startswith("np2"):
        return ["tfmpirun", "-np", "2", sys.executable] + base
    if variant.startswith("perturb") and variant != "perturb":
        return [sys.executable] + base + ["--variant", "perturb",
                                          "--perturb-index", variant[len("perturb"):]]
    v = {"plain_again": "plain"}.get(variant, variant)
    return [sys.executable] + base + ["--variant", v]


def ensemble_variants(k):
    return [f"perturb{i}" for i in range(1, k + 1)]


def run_all(out, extra, force, timeout, ensemble, variants):
    for floatx in ("float32", "float64"):
        for variant in variants + (ensemble_variants(ensemble) if floatx == "float32" else []):
            path = os.path.join(out, f"{variant}-{floatx}-rank0.npz")
            if os.path.exists(path) and not force:
                continue
            cmd = command(variant, floatx, out, extra)
            print("$", " ".join(cmd), flush=True)
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
            lines = [l for l in r.stdout.splitlines() if l.startswith("RUN ")]
            print("\n".join(lines) if r.returncode == 0 else r.stdout[-3000:], flush=True)
            if r.returncode != 0:
                raise SystemExit(f"run failed: {' '.join(cmd)}")
        for line in subprocess.run([sys.executable, SCRIPT, out, "--variant", "gradcheck",
                                    "--floatx", floatx] + extra, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True,
                                   timeout=timeout).stdout.splitlines():
            if line.startswith("GRADCHECK"):
                print(line, flush=True)


def load(out, variant, floatx):
    return dict(np.load(os.path.join(out, f"{variant}-{floatx}-rank0.npz")))


def first_above(rel, threshold):
    idx = np.nonzero(rel > threshold)[0]
    return str(idx[0] + 1) if len(idx) else "-"


def report_ensemble(out, k, variants):
    """Spread of the end figures over runs that differ by 1 ulp in one weight."""
    names = [v for v in ("plain", "np2", "perturb") if v in variants] + ensemble_variants(k)
    rows = []
    for name in names:
        run = load(out, name, "float32")
        steps = int(run["steps_per_epoch"])
        ep = [run["losses"][i * steps:(i + 1) * steps].mean()
              for i in range(len(run["losses"]) // steps)]
        rows.append((name, ep, run["val_losses"]))
    print(f"\n== float32 ensemble: {', '.join(names)} (perturb*: a different initial "
          "weight moved by 1 ulp) ==")
    for name, ep, val in rows:
        print(f"{name:12s} epoch mean losses " + " ".join(f"{v:.5f}" for v in ep) +
              "   val " + " ".join(f"{v:.4f}" for v in val))
    for e in range(len(rows[0][1])):
        vals = [r[1][e] for r in rows]
        print(f"epoch {e + 1} mean loss: min {min(vals):.5f} max {max(vals):.5f} "
              f"(max/min {max(vals) / min(vals):.2f})")
    vals = [r[2][-1] for r in rows]
    print(f"final val loss: min {min(vals):.4f} max {max(vals):.4f} "
          f"(max/min {max(vals) / min(vals):.2f})")


def report(out, plot, variants):
    curves = {}
    for floatx in ("float32", "float64"):
        ref = load(out, "plain", floatx)
        steps = int(ref["steps_per_epoch"])
        n = len(ref["losses"])
        marks = sorted({s for s in (1, 10, 50, steps, steps + steps // 2, n)
                        if s in set(ref["snap_steps"])})
        print(f"\n== {floatx}: {n} steps ({steps} per epoch); against plain ==")
        head = (f"{'run':12s} {'max|dloss|/loss':>15s} " +
                " ".join(f"{'>' + format(t, '.0e'):>6s}" for t in THRESHOLDS) + "  " +
                " ".join(f"{'w@' + str(s):>9s}" for s in marks) + "  epoch mean losses / val")
        print(head)
        for variant in variants:
            run = load(out, variant, floatx)
            rel = np.abs(run["losses"] - ref["losses"]) / np.abs(ref["losses"])
            at = {s: i for i, s in enumerate(ref["snap_steps"])}
            wrel = np.array([np.linalg.norm(run["snaps"][i] - ref["snaps"][i]) /
                             np.linalg.norm(ref["snaps"][i]) for i in range(len(at))])
            curves[(floatx, variant)] = (ref["snap_steps"], wrel, rel)
            ep = [run["losses"][i * steps:(i + 1) * steps].mean() for i in range(n // steps)]
            print(f"{variant:12s} {rel.max():15.3e} " +
                  " ".join(f"{first_above(rel, t):>6s}" for t in THRESHOLDS) + "  " +
                  " ".join(f"{wrel[at[s]]:9.1e}" for s in marks) + "  " +
                  " ".join(f"{v:.5f}" for v in ep) + " / " +
                  " ".join(f"{v:.4f}" for v in run["val_losses"]))
        if "np2" not in variants or "split" not in variants:
            continue
        np2, split = load(out, "np2", floatx), load(out, "split", floatx)
        same = (np.array_equal(np2["losses"], split["losses"]) and
                np.array_equal(np2["final"], split["final"]))
        print(f"np2 vs split bitwise identical (losses and final weights): {same}")
        if not same:
            rel = np.abs(np2["losses"] - split["losses"]) / np.abs(split["losses"])
            print(f"  np2 vs split: max rel loss diff {rel.max():.3e}, first > 1e-6 at "
                  f"{first_above(rel, 1e-6)}")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 5))
        for (floatx, variant), (s, wrel, _) in curves.items():
            if variant in ("plain", "plain_again", "np2_again"):
                continue
            ax.semilogy(s, np.maximum(wrel, 1e-18), ("-" if floatx == "float32" else "--"),
                        label=f"{variant} {floatx}")
        ax.set_xlabel("step")
        ax.set_ylabel("||w - w_plain|| / ||w_plain||")
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        fig.savefig(plot, dpi=110, bbox_inches="tight")
        print(f"\nplot: {plot}")


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="/tmp/tfmpi-divergence")
    p.add_argument("--plot", default=None, help="write a PNG of the weight drift")
    p.add_argument("--force", action="store_true")
    p.add_argument("--timeout", type=int, default=600, help="per run, seconds")
    p.add_argument("--ensemble", type=int, default=0,
                   help="K more float32 runs, each with a different weight moved by 1 ulp")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated subset of " + ",".join(VARIANTS) + " (plain is needed)")
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    if "plain" not in variants or not set(variants) <= set(VARIANTS):
        p.error(f"--variants: a subset of {','.join(VARIANTS)} that includes plain")
    variants = [v for v in VARIANTS if v in variants]
    os.makedirs(args.out, exist_ok=True)
    run_all(args.out, extra, args.force, args.timeout, args.ensemble, variants)
    report(args.out, args.plot, variants)
    if args.ensemble:
        report_ensemble(args.out, args.ensemble, variants)


if __name__ == "__main__":
    main()
