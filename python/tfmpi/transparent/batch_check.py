"""Every rank must see the same global batches; this checks that they do.

Note [Batch agreement]
Splitting a batch is only right if every rank's input pipeline produced the
same batch: each rank then takes its own rows of one global batch. Pipelines
disagree when their order is not deterministic (`deterministic=False`, a
parallel interleave), when files are listed in a different order on each host,
or when data is shuffled with randomness the shared seed does not reach (an
unseeded `np.random.default_rng()`). Training would go on, silently wrong.
So on the first FIRST_STEPS steps of every pass over the data (epoch,
evaluation, prediction, custom-loop iteration) and on every
TFMPI_BATCH_CHECK_INTERVAL-th step after that (1: every step; 0: never), each
rank fingerprints the whole global batch (farmhash64 of its bytes, row by row,
then of the rows) and the fingerprints are allgathered. If any differs from
rank 0's, every rank stops with BatchMismatchError naming the step and the
ranks. The cost is one hash of the batch and an 8-byte allgather on a checked
step, and a counter update on the others.
"""

import re

import tensorflow as tf

from tfmpi.errors import BatchMismatchError
from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import loops, naming, state

FIRST_STEPS = 2
_MARK = "TFMPI_BATCH_MISMATCH"
CAUSES = (
    "Every rank must read the same batches in the same order: the batch is split across the "
    "ranks after it is read. Likely causes: a tf.data pipeline with deterministic=False (or "
    "options.deterministic = False), files listed in a different order on each host (sort "
    "the file list), or data shuffled or augmented with randomness that is not seeded (e.g. "
    "np.random.default_rng() without a seed) before it reaches Keras. In per-rank batch "
    "mode, fit puts the ranks' batches together, so a script that reads different data on "
    "each rank needs TFMPI_SHARES=equal (whole batches, unchecked). "
    "TFMPI_BATCH_CHECK_INTERVAL=0 turns this check off.")

_counters = {}  # loop name -> tf.Variable int64 [pass, step]
CUSTOM_LOOP = "custom_loop"  # a custom loop's iterator read inside a tf.function


def _fingerprint_rows(t):
    if isinstance(t, tf.RaggedTensor):
        return tf.concat([_fingerprint_rows(t.flat_values),
                          _fingerprint_rows(t.nested_row_splits[0])], axis=1)
    if isinstance(t, tf.SparseTensor):
        return tf.concat([_fingerprint_rows(t.values), _fingerprint_rows(t.indices)], axis=1)
    if t.dtype == tf.bool:
        t = tf.cast(t, tf.uint8)
    return tf.fingerprint(tf.reshape(t, [1, -1]))


def fingerprint(data):
    """One int64 fingerprint of every tensor in `data` (eagerly or in a graph)."""
    parts = [_fingerprint_rows(t) for t in tf.nest.flatten(data)
             if isinstance(t, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor))]
    if not parts:
        return tf.zeros([1], tf.int64)
    combined = tf.fingerprint(tf.concat(parts, axis=1))
    return tf.reshape(tf.bitcast(tf.reshape(combined, [8]), tf.int64), [1])


def _due(step):
    interval = state.options.batch_check_interval
    due = step < FIRST_STEPS
    if interval > 0:
        due = tf.logical_or(due, tf.equal(step % interval, 0))
    return due


def enabled():
    return state.options.batch_check_interval > 0 and state.size > 1


def _counter(loop):
    if loop not in _counters:
        with tf.init_scope():
            _counters[loop] = tf.Variable([0, 0], dtype=tf.int64, trainable=False,
                                          name=f"tfmpi_batch_check_{loop}")
    return _counters[loop]


def loop_started(loop):
    """A Keras loop (fit, evaluate, ...) begins: its passes are counted from 1.
    Its counter is made here, eagerly, if it is new: made while Keras traces
    the step again (train_on_batch after fit traces fit's train function
    anew), it would be a variable created by a later trace, which tf.function
    refuses."""
    if enabled():
        _counter(loop).assign([0, 0])


def pass_started():
    """The innermost Keras loop starts a pass over its data (an epoch)."""
    loop = loops.innermost()
    if enabled() and loop is not None:
        v = _counter(loop)
        v.assign([int(v[0]) + 1, 0])


def graph_check(data, split=None, when=None, loop=None):
    """Inside a step Keras compiles: check the global batch `data` when due
    (and `when`, a bool tensor every rank computes alike, holds).
    For a slice a sharded pipeline made (input_sharding.py), `split` is its
    [lo, size, B, fingerprint of the undecoded global batch]: the
    fingerprints are compared and the slices must partition the batch.
    `loop` names the counter (default: the innermost Keras loop's)."""
    if not enabled():
        return
    loop = loop or loops.innermost() or "step"
    counts = _counter(loop).assign_add([0, 1])
    epoch, step = counts[0], counts[1] - 1
    label = "a tf.function of a custom loop" if loop == CUSTOM_LOOP else loop
    where = _MARK + "[" + label + ", " + ("epoch {}, step {}" if loop == "fit" else "pass {}, step {}")

    def compare():
        if split is None:
            gathered = tops.allgather(fingerprint(data), name=naming.name("batchcheck"))
        else:
            splits = tops.allgather(tf.reshape(split, [1, 4]), name=naming.name("batchcheck"))
            gathered = splits[:, 3]
        same = tf.equal(gathered, gathered[0])
        bad = tf.reshape(tf.where(tf.logical_not(same)), [-1])
        message = tf.strings.format(where + ": ranks {} drew a different batch from rank 0]",
                                    (tf.maximum(epoch, 1), step + 1, bad), summarize=-1)
        checks = [tf.debugging.Assert(tf.reduce_all(same), [message])]
        if split is not None:
            ends = tf.cumsum(splits[:, 1])
            starts = tf.concat([[0], ends[:-1]], 0)
            partition = tf.logical_and(tf.reduce_all(tf.equal(splits[:, 0], starts)),
                                       tf.equal(ends[-1], splits[0, 2]))
            message = tf.strings.format(
                where + ": the ranks' slices (starts {}, sizes {}) do not partition the batch of "
                "{}: the ranks' sharded input pipelines cut it differently. This is a fault in "
                "tfmpi; TFMPI_INPUT_SHARDING=off avoids it]",
                (tf.maximum(epoch, 1), step + 1, splits[:, 0], splits[:, 1], splits[0, 2]),
                summarize=-1)
            checks.append(tf.debugging.Assert(partition, [message]))
        with tf.control_dependencies(checks):
            return tf.constant(0)

    due = _due(step) if when is None else tf.logical_and(_due(step), when)
    tf.cond(due, compare, lambda: tf.constant(0))


class EagerCheck:
    """The same check for a custom loop's iterator (one pass per iterator).
    Read inside a tf.function, the iterator checks in the graph instead, on
    the counter CUSTOM_LOOP, whose pass this starts."""

    def __init__(self):
        self.step = 0
        if enabled():
            v = _counter(CUSTOM_LOOP)  # made eagerly, not inside the script's trace
            v.assign([v[0] + 1, 0])

    def check(self, element, split=None):
        """`split`: as for graph_check, for a slice of a sharded pipeline."""
        step, self.step = self.step, self.step + 1
        if not enabled() or not bool(_due(tf.constant(step, tf.int64))):
            return
        where = f"tfmpi: in a custom loop's pass over its dataset, step {step + 1}"
        if split is None:
            gathered = tops.allgather(fingerprint(element), name=naming.name("batchcheck")).numpy()
        else:
            splits = tops.allgather(tf.reshape(split, [1, 4]), name=naming.name("batchcheck")).numpy()
            gathered = splits[:, 3]
        bad = [r for r in range(len(gathered)) if gathered[r] != gathered[0]]
        if bad:
            raise BatchMismatchError(f"{where}: ranks {bad} drew a different batch from rank 0. {CAUSES}")
        if split is not None:
            starts, sizes = [int(x) for x in splits[:, 0]], [int(x) for x in splits[:, 1]]
            if starts != [sum(sizes[:r]) for r in range(len(sizes))] or sum(sizes) != splits[0, 2]:
                raise BatchMismatchError(
                    f"{where}: the ranks' slices (starts {starts}, sizes {sizes}) do not partition "
                    f"the batch of {splits[0, 2]}: the ranks' sharded input pipelines cut it "
                    "differently. This is a fault in tfmpi; TFMPI_INPUT_SHARDING=off avoids it")


def translate(error):
    """BatchMismatchError for an error raised by graph_check's assertion, else None."""
    found = re.search(_MARK + r"\[(.*?)\]\]", str(error), re.S)
    if not found:
        return None
    what = found.group(1)
    return BatchMismatchError(f"tfmpi: in {what}." + ("" if "fault in tfmpi" in what else f" {CAUSES}"))
