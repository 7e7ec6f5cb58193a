"""Ranks that share a host share its cores, and a rank held below its CPUs
by a cgroup quota keeps to the quota (Note [Threads per rank],
src/tfmpi/planning/threads.h).

Runs at start-up, before the script imports TensorFlow: the C++ plan gives
this rank its part of the host's cores (affinity mask and cgroup quota, split
over the ranks on this host), and TensorFlow's intra-op and inter-op pools are
sized to it through TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS, and
OpenMP libraries loaded later through OMP_NUM_THREADS. A variable the user set
is left alone, and so is a size the script sets itself
(tf.config.threading.set_*_parallelism_threads wins over the environment).
With TFMPI_BIND_CORES=1 each rank also keeps only its own CPUs.
TFMPI_THREADS=off keeps TensorFlow's defaults.
"""

import os
import sys

VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")


def apply(options, core, rank, local_rank, local_size):
    """Sets this rank's pool sizes; returns the plan (None when nothing was done)."""
    if options.threads == "off":
        return None
    plan = core.thread_plan(local_rank, local_size, options.bind_cores)
    if not plan["apply"]:
        return None
    values = {"TF_NUM_INTRAOP_THREADS": plan["intra_op"],
              "TF_NUM_INTEROP_THREADS": plan["inter_op"],
              "OMP_NUM_THREADS": plan["intra_op"]}
    kept = [name for name in VARIABLES if name in os.environ]
    for name, value in values.items():
        os.environ.setdefault(name, str(value))
    if plan["bind_cpus"]:
        try:
            core.bind_process(plan["bind_cpus"])
        except RuntimeError as e:  # the run goes on unbound, as without TFMPI_BIND_CORES
            print(f"tfmpi: rank {rank}: could not bind to CPUs {plan['bind_cpus']}: {e}",
                  file=sys.stderr, flush=True)
            plan = {**plan, "bind_cpus": []}
    if rank == 0:
        bound = f", bound to CPUs {plan['bind_cpus']}" if plan["bind_cpus"] else ""
        kept_text = f"; kept the user's {', '.join(kept)}" if kept else ""
        print(f"tfmpi: rank 0's thread pools: {plan['why']}{bound}{kept_text} "
              "(TFMPI_THREADS=off: TensorFlow's defaults)", file=sys.stderr, flush=True)
    return plan
