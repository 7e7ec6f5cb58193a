"""What dealing per-rank batches by speed costs on equal ranks (not a test).

    python bench/per_rank_dealing.py [--repeats 3] [--steps 16] [--np 2]

Runs examples/resnet50_synthetic.py under `tfmpirun --batch-mode per-rank`
(1 intra-op thread per rank) with TFMPI_SHARES=equal (each rank trains on
whole batches it is dealt) and TFMPI_SHARES=adaptive, the default (the N
batches of a step put together and cut by the work shares, Note [Batches by
shares], python/tfmpi/transparent/per_rank.py), interleaved, and prints the
medians and the median of the paired ratios. On equal ranks the shares stay
equal, so the difference is the cost of holding, cutting and checking the
step's N batches and of the rebalancing bookkeeping.
"""

import argparse
import os
import statistics
import sys

from training_bench import EXAMPLE, run

MODES = ("equal", "adaptive")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--np", type=int, default=2, dest="np_")
    p.add_argument("--batch-size", type=int, default=16, help="per-rank batch")
    args = p.parse_args()
    if args.repeats < 1 or args.np_ < 2 or args.steps < 3 * args.np_ or args.batch_size < 1:
        p.error("need --repeats >= 1, --np >= 2, --steps >= 3 x --np (each rank times its "
                "steps after 2 warm-up steps) and --batch-size >= 1")
    rates = {m: [] for m in MODES}
    for i in range(args.repeats):
        for mode in MODES:
            os.environ["TFMPI_SHARES"] = mode
            cmd = ["tfmpirun", "-np", str(args.np_), "--batch-mode", "per-rank", sys.executable,
                   EXAMPLE, "--batch-size", str(args.batch_size), "--steps", str(args.steps),
                   "--threads", "1", "--jit", "off"]
            # the example counts --batch-size images per step: one rank's batch
            rate = args.np_ * run(cmd, timeout=1800)
            rates[mode].append(rate)
            print(f"repeat {i + 1}/{args.repeats}, TFMPI_SHARES={mode}: {rate:.2f} images/s",
                  flush=True)
    ratios = [a / e for a, e in zip(rates["adaptive"], rates["equal"])]
    for mode in MODES:
        print(f"TFMPI_SHARES={mode}: median {statistics.median(rates[mode]):.2f} images/s "
              f"({', '.join(f'{r:.2f}' for r in rates[mode])})")
    print(f"adaptive / equal, median of paired ratios: {statistics.median(ratios):.3f} "
          f"({', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
