"""The fused optimizer updates against Keras' own, and what they do to scaling (not a test).

    python bench/fused_updates.py [--models mlp42m,mlp] [--optimizer adam|sgd-momentum] [--repeats 3]

Runs bench/step_job.py (model.fit with Adam or SGD with momentum, synthetic
data, the model's global batch) as one plain process (1 thread; all cores) and
under `tfmpirun -np 1` and `-np 2` with TFMPI_FUSED_UPDATES=0 and =1, every
configuration once per repeat, interleaved, and prints the median step time
of each with its ratios to the plain 1-process runs and to the fastest
1-process configuration of all (which, with the fused update, is
`tfmpirun -np 1`). Note [Fused updates], src/tfmpi/bindings/tensorflow/fused_updates.cc.
"""

import argparse
import os
import re
import statistics
import sys

from training_bench import run

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_job.py")
STEP_MS = re.compile(r"^STEP_MS ([0-9.]+)", re.M)
STEPS = {"mlp": 60, "cnn": 60, "mlp12m": 30, "mlp42m": 30, "resnet50": 12}
CORES = len(os.sched_getaffinity(0))


def configurations():
    """(label, command prefix, environment, ranks) per configuration."""
    one = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
    every = {"TF_NUM_INTRAOP_THREADS": str(CORES), "TF_NUM_INTEROP_THREADS": str(CORES)}
    yield "1 process, 1 thread", [sys.executable], one, 1
    yield f"1 process, {CORES} threads", [sys.executable], every, 1
    for n in (1, 2):
        for fused in ("0", "1"):
            label = f"tfmpirun -np {n}, {'fused' if fused == '1' else 'Keras'} update"
            yield (label, ["tfmpirun", "-np", str(n), sys.executable],
                   {"TFMPI_FUSED_UPDATES": fused}, n)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp42m,mlp")
    p.add_argument("--optimizer", choices=("adam", "sgd-momentum"), default="adam")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    models = args.models.split(",")
    if args.repeats < 1 or any(m not in STEPS for m in models):
        p.error(f"models from {', '.join(STEPS)}; --repeats >= 1")
    base = {k: v for k, v in os.environ.items()
            if k not in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "TFMPI_FUSED_UPDATES")}
    configs = list(configurations())
    ranks = {label: n for label, _, _, n in configs}
    for model in models:
        times = {}
        for i in range(args.repeats):
            for label, prefix, env, _ in configs:
                os.environ.clear()
                os.environ.update(base, **env)
                ms = run(prefix + [JOB, model, "--steps", str(STEPS[model]),
                                   "--optimizer", args.optimizer], timeout=1800, figure=STEP_MS)
                times.setdefault(label, []).append(ms)
                print(f"{model}, repeat {i + 1}, {label}: {ms:.1f} ms per step", flush=True)
        os.environ.clear()
        os.environ.update(base)
        median = {label: statistics.median(t) for label, t in times.items()}
        plain = min(m for label, m in median.items() if label.startswith("1 process"))
        single = min(m for label, m in median.items() if ranks[label] == 1)
        print(f"\n{model}, {args.optimizer}, {args.repeats} runs each, median ms per step "
              "(lower is faster)\n")
        print("| configuration | ms/step | runs | x fastest plain 1 process | x fastest 1-process "
              "configuration |")
        print("|---|---|---|---|---|")
        for label, t in times.items():
            runs = ", ".join(f"{x:.1f}" for x in t)
            print(f"| {label} | {median[label]:.1f} | {runs} | {plain / median[label]:.2f} | "
                  f"{single / median[label]:.2f} |")


if __name__ == "__main__":
    main()
