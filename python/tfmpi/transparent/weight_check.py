"""Every rank must hold the same weights; this checks that they do.

Note [Weight agreement]
Every update is the 1-process update only while the ranks train one model:
the same variables, updated alike. A script that computes differently on
each rank (code that branches on the rank or the host, a model built
differently, an optimizer configured from a source the shared seed does not
reach) would train the ranks apart, silently: the batch check (Note [Batch
agreement]) sees the inputs, not what the ranks do with them. So at the
cadence of the batch check (after the first FIRST_STEPS steps of a loop, then
every TFMPI_BATCH_CHECK_INTERVAL-th) each rank fingerprints the variables it
trains (farmhash64 of their bytes, one per variable) and the fingerprints are
allgathered; where a variable differs from rank 0's, every rank stops with
WeightMismatchError naming the step, the variable and the ranks. Checked:
the trainable variables of a model in fit (after its train function runs),
and in a custom loop the variables its tapes reduced (when the loop takes its
next batch). The cost is one hash of the weights and an allgather of 8 bytes
per variable on a checked step.
"""

import tensorflow as tf

from tfmpi.errors import WeightMismatchError
from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batch_check, naming, rank0, state

CAUSES = (
    "Every rank must compute the same update: code that branches on the rank or the host, a "
    "model built or compiled differently on each rank, or randomness the shared seed does not "
    "reach (an unseeded source) makes the ranks train apart. TFMPI_BATCH_CHECK_INTERVAL=0 "
    "turns this check (and the batch check) off.")


def due(step):
    """Whether the weights are checked after `step` (counted from 1)."""
    if not batch_check.enabled():
        return False
    interval = state.options.batch_check_interval
    return step <= batch_check.FIRST_STEPS or step % interval == 0


def _name(v):
    return getattr(v, "path", None) or v.name


def check(variables, where, step):
    """Raise WeightMismatchError where a variable differs from rank 0's (eager)."""
    variables = [v for v in variables if v is not None]
    if not variables or rank0.inside():
        return
    prints = tf.stack([batch_check.fingerprint(tf.convert_to_tensor(v))[0] for v in variables])
    gathered = tops.allgather(prints[None], name=naming.name("weightcheck")).numpy()
    differ = [k for k in range(len(variables)) if any(gathered[:, k] != gathered[0, k])]
    if not differ:
        return
    k = differ[0]
    ranks = [r for r in range(len(gathered)) if gathered[r, k] != gathered[0, k]]
    more = f" (and {len(differ) - 1} more)" if len(differ) > 1 else ""
    raise WeightMismatchError(
        f"tfmpi: in {where}, after step {step}: variable {_name(variables[k])!r}{more} differs on "
        f"ranks {ranks} from rank 0's. {CAUSES}")


def after_step(variables, where, step):
    """Between steps: the weights checked if `step` (counted from 1) is due."""
    if due(step):
        check(variables, where, step)
