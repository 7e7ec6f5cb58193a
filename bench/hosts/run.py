"""A small CNN across two emulated hosts: what tfmpi's per-step collectives cost
when they cross a network. One command, one run (needs root: tests/cluster):

    python bench/hosts/run.py [--rounds 3] [--steps 150] [--baseline DIR]

Two emulated hosts of one core each (network namespaces joined by TCP, CPU
quotas in cgroups). `bench/step_job.py cnn --metrics` (2 conv + 2 dense layers
on 32x32 inputs, global batch 64, an accuracy metric, model.fit) runs as one
process on one host (the strongest honest baseline for one such host), and
under tfmpirun -np 2 across both hosts at the same global batch. --baseline DIR
also runs -np 2 with DIR first on PYTHONPATH (another build of the tfmpi
package), so that a change is compared with what it replaces in the same run.
Configurations are interleaved, --rounds times; medians of the runs' median
step times. Scaling efficiency = (1-process step / 2-rank step) / 2.
"""

import argparse
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))

import harness  # noqa: E402
from step_timing import JOB, baseline_env, interleaved_medians  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--baseline", help="a folder holding another build of the tfmpi package")
    a = parser.parse_args()
    job = [sys.executable, JOB, "cnn", "--metrics", "--steps", str(a.steps)]
    with harness.EmulatedCluster(hosts=2, cpu_quota=1.0) as cluster:
        # the agent starts a clean environment, as ssh does: set what the job needs
        remote = "env TF_CPP_MIN_LOG_LEVEL=2 " + shlex.join(job)
        configs = [("1 process on one host", cluster.command(0, remote), {})]
        tfmpirun = ["tfmpirun", "-np", "2", *cluster.tfmpirun_args()] + job
        configs.append(("tfmpirun -np 2, two hosts", tfmpirun, {}))
        if a.baseline:
            configs.append(("tfmpirun -np 2, two hosts, baseline build", tfmpirun,
                            baseline_env(a.baseline)))
        times = interleaved_medians(configs, a.rounds, digits=1)
    one = times[configs[0][0]][0]
    print(f"| {a.steps} steps, median of {a.rounds} runs | step (ms) | runs | "
          "scaling efficiency |")
    print("|---|---|---|---|")
    for name, _, _ in configs:
        t, per_run = times[name]
        runs = ", ".join(f"{v:.1f}" for v in per_run)
        eff = "-" if name == configs[0][0] else f"{one / t / 2:.0%}"
        print(f"| {name} | {t:.1f} | {runs} | {eff} |")


if __name__ == "__main__":
    main()
