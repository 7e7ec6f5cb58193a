"""What synchronized BatchNormalization costs on one host (Note [Synchronized
by default], python/tfmpi/transparent/batchnorm.py). One command, one run:

    python bench/sync_batchnorm.py [--models cnn_bn,resnet50] [--np 2] [--rounds 3]
                                   [--steps 40] [--baseline DIR]

For each model of bench/step_job.py (cnn_bn: the small CNN with a
BatchNormalization after each of its two convolutions; resnet50: Keras'
ResNet-50, 53 BatchNormalization layers), interleaved over --rounds rounds:
one plain process (the baseline), `tfmpirun -np N` with the moments over
each rank's slice (TFMPI_SYNC_BATCHNORM=0) and with the moments over the
global batch (the default). Medians of the runs' median step times; samples
per second at the model's global batch; the cost of synchronizing, as the
synchronized step over the per-slice one. --baseline DIR also runs the
synchronized moments with DIR first on PYTHONPATH (another build of the tfmpi
package), to compare a change in one run. Prints a Markdown table. Across two
emulated hosts: bench/hosts/run.py --model cnn_bn --env TFMPI_SYNC_BATCHNORM=0.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_job import MODELS  # noqa: E402
from step_timing import baseline_env, interleaved_medians, job_command  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn_bn,resnet50")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--baseline", help="a folder holding another build of the tfmpi package")
    a = parser.parse_args()
    models = a.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    if a.np < 2:
        parser.error(f"--np {a.np}: synchronizing needs at least 2 ranks")
    print(f"| model (global batch) | configuration | median step (ms) | samples/s | "
          f"runs (ms) |")
    print("|---|---|---|---|---|")
    for model in models:
        job = job_command(model, a.steps)
        ranks = ["tfmpirun", "-np", str(a.np)]
        configs = [("1 process", job, {}),
                   (f"-np {a.np}, per-slice moments", ranks + job,
                    {"TFMPI_SYNC_BATCHNORM": "0"}),
                   (f"-np {a.np}, synchronized moments (default)", ranks + job, {})]
        if a.baseline:
            configs.append((f"-np {a.np}, synchronized moments, baseline build", ranks + job,
                            baseline_env(a.baseline)))
        times = interleaved_medians(configs, a.rounds)
        batch = MODELS[model][0]
        for label, _, _ in configs:
            median, runs = times[label]
            print(f"| {model} ({batch}) | {label} | {median:.1f} | {batch * 1000 / median:.1f} | "
                  + ", ".join(f"{t:.1f}" for t in runs) + " |")
        per_slice, synced = times[configs[1][0]][0], times[configs[2][0]][0]
        print(f"| {model} ({batch}) | synchronized / per-slice | {synced / per_slice:.3f} | | |",
              flush=True)


if __name__ == "__main__":
    main()
