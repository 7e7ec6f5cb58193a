"""The fixed cost of a training step: a model with almost no compute (one
Dense layer on 16 features, batch 64, an accuracy metric: bench/step_job.py
tiny --metrics) trained by model.fit as one process and under tfmpirun -np N.
Its step time is Keras' per-step Python and TensorFlow's dispatch, plus, under
tfmpirun, everything tfmpi adds to a step (the split, the collectives of the
loss, the gradients and the metrics, their negotiation). The difference
between a rank's step and the 1-process step with one thread (what each rank
gets on a host shared by N ranks) is tfmpi's fixed cost per step. Every
configuration runs --rounds times, interleaved; medians of the runs' median
step times. Prints a Markdown table.

    python bench/fixed_cost.py [--np 2] [--steps 1000] [--rounds 5] [--baseline DIR]
                               [--env NAME=VALUE[,NAME=VALUE...]]

--baseline DIR also times tfmpirun with DIR first on PYTHONPATH: DIR holds
another build of the tfmpi package (e.g. copied from site-packages before a
change), so that a change is compared with what it replaces in one run. Each
--env (repeatable) also times tfmpirun with those variables set.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_timing import JOB, baseline_env, env_settings, interleaved_medians  # noqa: E402

ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="a folder holding another build of the tfmpi package")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE[,...]",
                        help="also run tfmpirun with these variables set")
    a = parser.parse_args()
    job = [sys.executable, JOB, "tiny", "--metrics", "--steps", str(a.steps)]
    configs = [
        ("1 process, all cores", job, {}),
        ("1 process, 1 thread", job, ONE_THREAD),
        (f"tfmpirun -np {a.np}", ["tfmpirun", "-np", str(a.np)] + job, {}),
    ]
    if a.baseline:
        configs.append((f"tfmpirun -np {a.np}, baseline build", ["tfmpirun", "-np", str(a.np)] + job,
                        baseline_env(a.baseline)))
    configs += [(f"tfmpirun -np {a.np}, {text}", ["tfmpirun", "-np", str(a.np)] + job, env)
                for text, env in env_settings(parser, a.env)]
    med = {label: m for label, (m, _) in interleaved_medians(configs, a.rounds).items()}
    base = med["1 process, 1 thread"]
    print(f"| {a.steps} steps, median of {a.rounds} runs | step (ms) | minus 1 process, 1 thread (ms) |")
    print("|---|---|---|")
    for label, _, _ in configs:
        print(f"| {label} | {med[label]:.2f} | {med[label] - base:+.2f} |")


if __name__ == "__main__":
    main()
