"""Exposed communication per step: the step time of `tfmpirun -np N` minus the
step time of the same run with TFMPI_SKIP_DATA=1 (allreduces and broadcasts
negotiated but moving no data, Note [Skipping the data]), interleaved over
--rounds runs, with the 1-process step for reference. With --hosts the ranks
run one per emulated host of one core (TCP, optionally --bandwidth Mbit/s
links; needs root: tests/cluster). One command:

    python bench/exposed/run.py [--model mlp42m] [--np 2] [--steps 30] [--rounds 3]
                                [--hosts] [--bandwidth MBIT] [--env NAME=VALUE[,...]]

Each --env (repeatable) also runs tfmpirun with those variables set.

Prints a Markdown table (docs/performance.md, "Exposed communication").
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import where  # noqa: E402
from step_timing import env_settings, interleaved_medians, job_command  # noqa: E402

# Equal, fixed shares: with TFMPI_SKIP_DATA each rank would see only its own
# timings, and rebalanced shares would differ between ranks.
FIXED = {"TFMPI_SHARES": "equal", "TFMPI_REBALANCE_STEPS": "0"}


def table(args, configs, where):
    configs = configs + [(f"tfmpirun, {text}", configs[1][1], {**FIXED, **env})
                         for text, env in args.settings]
    times = interleaved_medians(configs, args.rounds, digits=1)
    full, skipped = times["tfmpirun"][0], times["tfmpirun, TFMPI_SKIP_DATA=1"][0]
    one = times["1 process"][0]
    print(f"{os.cpu_count()} CPUs; {args.model}, {args.steps} steps, {where}; "
          f"median of {args.rounds} runs' median steps\n")
    print("| run | ms per step | runs |\n|---|---|---|")
    for label, (med, runs) in times.items():
        print(f"| {label} | {med:.1f} | {', '.join(f'{x:.0f}' for x in runs)} |")
    print(f"\nExposed communication: {full - skipped:.1f} ms per step, "
          f"{(full - skipped) / full:.0%} of the -np {args.np} step; "
          f"-np {args.np} against 1 process: {one / full:.2f}x the throughput (the same "
          "global batch per step)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp42m")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    where.add_arguments(parser)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE[,...]",
                        help="also run tfmpirun with these variables set")
    args = parser.parse_args()
    args.settings = env_settings(parser, args.env)
    job = job_command(args.model, args.steps)
    with where.placement(parser, args) as (tfmpirun, alone, description):
        launcher = tfmpirun + job
        table(args, [("1 process", alone(job) if alone else job, {}),
                     ("tfmpirun", launcher, FIXED),
                     ("tfmpirun, TFMPI_SKIP_DATA=1", launcher, {**FIXED, "TFMPI_SKIP_DATA": "1"})],
              description)


if __name__ == "__main__":
    main()
