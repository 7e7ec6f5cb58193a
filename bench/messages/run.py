"""How big the engine's MPI calls should be: step time of a communication-heavy
model (bench/step_job.py mlp42m: 42 M parameters, global batch 64) under
`tfmpirun -np N` for several TFMPI_MAX_MESSAGE_ELEMENTS values (the largest
count one MPI call carries; bigger tensors go out in pieces), and as one
process. Every setting runs --rounds times, interleaved; the median of the runs'
median step times is reported. Prints a Markdown table.

    python bench/messages/run.py [--np 2] [--rounds 3] [--steps 30]
        [--values 2147483647,4194304,1048576,262144,65536]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from step_timing import job_command, step_ms  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--values", default="2147483647,4194304,1048576,262144,65536")
    args = parser.parse_args()
    job = job_command("mlp42m", args.steps)
    configs = [("1 process", job, {})]
    for v in args.values.split(","):
        configs.append((f"-np {args.np}, TFMPI_MAX_MESSAGE_ELEMENTS={v}",
                        ["tfmpirun", "-np", str(args.np)] + job,
                        {"TFMPI_MAX_MESSAGE_ELEMENTS": v, "TFMPI_SHARES": "equal"}))
    runs = [[] for _ in configs]
    for _ in range(args.rounds):
        for i, (_, cmd, env) in enumerate(configs):
            runs[i].append(step_ms(cmd, env))
    base = statistics.median(runs[0])
    print(f"{os.cpu_count()} CPUs; ms per step (median of {args.rounds} runs); "
          "speed relative to 1 process\n")
    print("| run | ms per step | runs | speed vs 1 process |\n|---|---|---|---|")
    for (label, _, _), r in zip(configs, runs):
        m = statistics.median(r)
        print(f"| {label} | {m:.1f} | {', '.join(f'{x:.0f}' for x in r)} | {base / m:.2f}x |")


main()
