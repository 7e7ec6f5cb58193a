"""A small CNN across two emulated hosts: what tfmpi's per-step collectives cost
when they cross a network. One command, one run (needs root: tests/cluster):

    python bench/hosts/run.py [--rounds 3] [--steps 150] [--batch 64] [--quota 1]
                              [--baseline DIR] [--env NAME=VALUE[,NAME=VALUE...]]
                              [--np1-batch B] [--model cnn]

Two emulated hosts of one core each, or --quota cores (network namespaces
joined by TCP, CPU quotas in cgroups). `bench/step_job.py cnn --metrics` (2 conv
+ 2 dense layers on 32x32 inputs, an accuracy metric, model.fit; --model names
another of step_job.py's models) runs as one
process on one host, with TensorFlow's default pools and with pools of one
thread (the faster of the two is the baseline), and under tfmpirun -np 2 across
both hosts at the same global batch. --baseline DIR also runs -np 2 with DIR
first on PYTHONPATH (another build of the tfmpi package), so that a change is
compared with what it replaces in the same run; each --env (repeatable) also
runs -np 2 with those variables set; --np1-batch B also runs tfmpirun -np 1 on
one host at batch B. Configurations are interleaved, --rounds times; medians of
the runs' mean step times (the mean, not the median step: under a CPU quota the
median hides the steps that wait for the quota's next period). Scaling
efficiency = (best 1-process step / 2-rank step) / 2.
"""

import argparse
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))

import harness  # noqa: E402
from step_timing import JOB, baseline_env, env_settings, interleaved_medians  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=64, help="the global batch")
    parser.add_argument("--quota", type=float, default=1.0,
                        help="each host's CPU quota in cores (default 1: both hosts together "
                             "take the whole of a 2-core machine)")
    parser.add_argument("--baseline", help="a folder holding another build of the tfmpi package")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE[,...]",
                        help="also run -np 2 with these variables set")
    parser.add_argument("--np1-batch", type=int, metavar="B",
                        help="also run tfmpirun -np 1 on one host at global batch B (e.g. a "
                             "rank's slice: transparent mode with no peer)")
    parser.add_argument("--model", default="cnn", help="a model of bench/step_job.py")
    a = parser.parse_args()
    if a.quota <= 0:
        parser.error(f"--quota {a.quota}: must be a positive number of cores")
    settings = env_settings(parser, a.env)

    def job_at(batch):
        return [sys.executable, JOB, a.model, "--metrics", "--steps", str(a.steps),
                "--batch", str(batch)]

    job = job_at(a.batch)
    with harness.EmulatedCluster(hosts=2, cpu_quota=a.quota) as cluster:
        def alone(env):
            # the agent starts a clean environment, as ssh does: set what the job needs
            assigned = [f"{k}={v}" for k, v in {"TF_CPP_MIN_LOG_LEVEL": "2", **env}.items()]
            return cluster.command(0, shlex.join(["env", *assigned, *job]))

        # the best 1-process configuration: TensorFlow's default pools, or pools of the
        # host's one core (what tfmpirun gives a rank there, Note [Threads per rank])
        configs = [("1 process on one host", alone({}), {}),
                   ("1 process on one host, one-thread pools",
                    alone({"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}), {})]
        tfmpirun = ["tfmpirun", "-np", "2", *cluster.tfmpirun_args()] + job
        configs.append(("tfmpirun -np 2, two hosts", tfmpirun, {}))
        if a.baseline:
            configs.append(("tfmpirun -np 2, two hosts, baseline build", tfmpirun,
                            baseline_env(a.baseline)))
        configs += [(f"tfmpirun -np 2, two hosts, {s}", tfmpirun, env) for s, env in settings]
        if a.np1_batch:
            configs.append((f"tfmpirun -np 1, one host, batch {a.np1_batch}",
                            ["tfmpirun", "-np", "1", *cluster.tfmpirun_args()]
                            + job_at(a.np1_batch), {}))
        times = interleaved_medians(configs, a.rounds, digits=1, statistic="STEP_MEAN_MS")
    # efficiency against the best 1-process configuration
    one = min(times[name][0] for name, _, _ in configs if name.startswith("1 process"))
    print(f"| {a.steps} steps of {a.batch}, median of {a.rounds} runs | mean step (ms) | runs | "
          "scaling efficiency |")
    print("|---|---|---|---|")
    for name, _, _ in configs:
        t, per_run = times[name]
        runs = ", ".join(f"{v:.1f}" for v in per_run)
        eff = f"{one / t / 2:.0%}" if name.startswith("tfmpirun -np 2") else "-"
        print(f"| {name} | {t:.1f} | {runs} | {eff} |")


if __name__ == "__main__":
    main()
