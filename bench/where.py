"""Where a step benchmark runs its ranks: on this host, or one rank per
emulated host of one core (--hosts: network namespaces joined by TCP,
optionally --bandwidth Mbit/s links; needs root, tests/cluster). Shared by
bench/autotune and bench/exposed."""

import contextlib
import os
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "cluster"))


def add_arguments(parser):
    parser.add_argument("--hosts", action="store_true",
                        help="one rank per emulated host of one core (needs root)")
    parser.add_argument("--bandwidth", type=float, metavar="MBIT",
                        help="with --hosts: each host's link in Mbit/s")


@contextlib.contextmanager
def placement(parser, args):
    """Yields (tfmpirun prefix, a 1-process command prefix on the first host,
    a description) for args.np ranks."""
    if args.bandwidth and not args.hosts:
        parser.error("--bandwidth needs --hosts")
    if not args.hosts:
        yield ["tfmpirun", "-np", str(args.np)], [], "one host"
        return
    import harness  # tests/cluster

    with harness.EmulatedCluster(hosts=args.np, cpu_quota=1.0,
                                 bandwidth_mbit=args.bandwidth) as cluster:
        link = f"{args.bandwidth:g} Mbit/s links" if args.bandwidth else "unlimited links"

        def alone(job):
            # the agent starts a clean environment, as ssh does: set what the job needs
            return cluster.command(0, shlex.join(["env", "TF_CPP_MIN_LOG_LEVEL=2", *job]))

        yield (["tfmpirun", "-np", str(args.np), *cluster.tfmpirun_args()], alone,
               f"{args.np} emulated hosts of one core, TCP, {link}")
