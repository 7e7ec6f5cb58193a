"""File-level sharding (TFMPI_DATA_SHARDING=files, tfmpirun --data-sharding files).

Note [File sharding]
Element-level sharding (Note [Sharded input]) keeps the 1-process math but
still runs the order-defining part of a pipeline on every rank: each rank
lists, and for record files reads, the whole data set. For data too big for
that, this opt-in mode gives each rank its own files: a batched pipeline

    ... reader(files) ... -> batch(B) -> prefetch / with_options

whose graph holds a file reader (TFRecordDataset, TextLineDataset,
FixedLengthRecordDataset, CSV, ...) has the list of files cut to files
r, r + N, r + 2N, ... on rank r (TensorFlow's own FILE auto-shard rewrite:
it finds the list wherever the reader takes it, e.g. list_files followed by
interleave). Everything between the files and the batch (parsing, decoding,
a shuffle buffer) runs as the script wrote it, on the rank's records only,
and the batch is made at the rank's slice size instead of B: s_r rows, the
rank's work share of a batch of B (at least one row).

The global batch of a step is then the union of the ranks' local batches,
not B consecutive samples of one stream: the math changes in batch
composition only. Each step still applies sum_r (s_r / b) g_r with b the
rows of that step over all ranks, the gradient of the mean loss over the b
samples the ranks drew, and an epoch still visits every record once.

Ranks hold different numbers of records, so they would run out at different
steps, and a rank that stops while the others wait in a collective hangs
the job. Every batch a rank takes is therefore agreed first: each rank
allgathers its batch's row count (an exhausted rank counts 0 and offers an
empty batch); the step goes ahead while any rank has rows (or, where the
script batched with drop_remainder=True, while every rank has a full
slice), with slice [lo, size, b] from the counts, and every rank ends the
pass at the same step. Nothing is dropped: once a rank has run out, the
ranks gather the rows they have at each step and cut them as a global batch
(Note [Batches smaller than the ranks], batching.py), until the others are
done: no rank runs the model on an empty slice.

The agreement sits at the very end of the pipeline, with no prefetch after
it (the script's prefetch is applied before it, and tf.data's injected
prefetch is turned off), so a rank takes an agreement exactly when its step
takes a batch: the ranks run the same steps, so they make the same
agreements, even when the script stops a pass early (steps_per_epoch, a
break in a custom loop). It costs one small collective per step, made while
the step waits for its batch.

Not used for predict (its outputs must come back in the data's order: it
uses element-level sharding), in per-rank batch mode (refused at start-up),
and for pipelines without a file reader (they fall back to element-level
sharding, and rank 0 says so once). TensorFlow refuses a list of fewer
files than ranks when the pass starts.
"""

import sys

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, state

# Dataset ops that read files: TensorFlow's FILE auto-shard cuts their file lists.
READERS = frozenset({
    "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset", "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2", "CSVDataset", "CSVDatasetV2", "ExperimentalCSVDataset",
    "SqlDataset", "ExperimentalSqlDataset", "LMDBDataset", "ExperimentalLMDBDataset",
    "RecordIODataset"})

_said = set()
_serial = [0]


class Plan:
    """A batched pipeline whose files can be dealt to the ranks."""

    def __init__(self, unbatched, batch_size, drop_remainder, after):
        self.unbatched = unbatched      # the script's pipeline up to its batch
        self.batch_size = batch_size
        self.drop_remainder = drop_remainder
        self.after = after              # prefetch / options after the batch, in order


def enabled():
    return state.size > 1 and state.options.data_sharding == "files"


def runs_until_exhausted(plan, steps_per_epoch):
    """Whether a Keras loop's epochs over `plan` must each run until its data
    ends, whatever step count Keras inferred. A file-sharded pass lasts as
    many steps as the rank with the most rows for its slice needs, which
    changes with the work shares and with the files; both Keras lines keep
    the count of their first epoch, so a longer later epoch would be cut
    short (records never read) and, under tf_keras, a shorter one would end
    fit as "ran out of data". Not where the script gave steps_per_epoch."""
    return isinstance(plan, Plan) and steps_per_epoch in (None, 0, -1)


def _notice(reason):
    if state.rank == 0 and reason not in _said:
        _said.add(reason)
        print(f"tfmpi: --data-sharding files: this input pipeline is not sharded by files "
              f"({reason}); it is sharded by elements instead. See docs/transparent.md, "
              f"File-level sharding.", file=sys.stderr)


def _ops(dataset):
    """The op names in `dataset`'s graph and in the functions it calls."""
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


def analyse(dataset):
    """A Plan, or None with the reason it cannot be sharded by files."""
    from tfmpi.transparent.input_sharding import find_batch

    found = find_batch(dataset)
    if type(found.top).__name__ != "_BatchDataset":
        return None, "its last step is not batch(B) (then only prefetch / with_options)"
    if found.batch_size is None:
        return None, "the batch size is not a constant"
    unbatched = found.top._input_dataset
    if not READERS & _ops(unbatched):
        return None, ("no file reader in it (e.g. TFRecordDataset, TextLineDataset, "
                      "FixedLengthRecordDataset)")
    return Plan(unbatched, found.batch_size, found.drop_remainder, found.after), None


def plan_for(dataset):
    """The Plan for `dataset`, or None (the reason said once)."""
    try:
        plan, reason = analyse(dataset)
    except (AttributeError, tf.errors.OpError) as e:  # internals of another tf.data release
        plan, reason = None, f"its structure could not be read ({e})"
    if plan is None:
        _notice(reason)
    return plan


def _rank_files(unbatched):
    """`unbatched` with its file list cut to this rank's files."""
    from tensorflow.python.data.experimental.ops import distribute

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    return distribute._AutoShardDataset(unbatched.with_options(options), state.size, state.rank)


def _no_rows(spec):
    """A batch of 0 rows of `spec` (unknown inner dimensions 1)."""
    def zeros(s):
        shape = [0] + [1 if d is None else d for d in s.shape.as_list()[1:]]
        return tf.zeros(shape, s.dtype)
    return tf.nest.map_structure(zeros, spec)


def rewrite(plan):
    """This rank's pipeline: its files, batched to its slice, every batch
    agreed with the other ranks. Elements {KEY_SPLIT: [lo, size, b, 0, 1 if
    some rank has no rows],
    KEY_DATA: the rank's rows} (input_sharding.unwrap reads them)."""
    from tfmpi.transparent.input_sharding import KEY_DATA, KEY_SPLIT, reapply_after

    bounds = [int(v) for v in batching.all_slice_bounds(tf.constant(plan.batch_size, tf.int64))]
    rows = [max(1, hi - lo) for lo, hi in zip(bounds, bounds[1:])]
    mine = rows[state.rank]
    batched = _rank_files(plan.unbatched).batch(mine, drop_remainder=plan.drop_remainder)
    local = reapply_after(plan, batched)

    def element(*x):
        return x if len(x) > 1 else x[0]

    # An exhausted rank offers an empty batch for as long as the others go on,
    # shaped like its last real batch (a batch of the element spec, unknown
    # inner dimensions 1, if it had none).
    no_rows = _no_rows(local.element_spec)
    offered = local.map(lambda *x: (element(*x), True)).concatenate(
        tf.data.Dataset.from_tensors(no_rows).repeat().map(lambda *x: (element(*x), False)))

    def carry(empty, item):
        x, real = item
        out = tf.nest.map_structure(
            lambda a, b: tf.cond(real, lambda: a, lambda: b), x, empty)
        return tf.nest.map_structure(lambda t: t[:0], out), (out, real)

    offered = offered.scan(no_rows, carry)

    _serial[0] += 1
    name = f"tfmpi/input_files/{_serial[0]}"
    full = sum(rows)

    def agree(x, real):
        size = tf.where(real, batching.leading_dim(x), tf.constant(0, tf.int64))
        sizes = tops.allgather(tf.reshape(size, [1]), name=name)
        lo = tf.reduce_sum(sizes[:state.rank])
        some_empty = tf.cast(tf.reduce_any(tf.equal(sizes, 0)), tf.int64)
        return x, tf.stack([lo, size, tf.reduce_sum(sizes), tf.constant(0, tf.int64), some_empty])

    def go_on(x, info):
        return tf.equal(info[2], full) if plan.drop_remainder else info[2] > 0

    agreed = offered.map(agree).take_while(go_on)
    out = agreed.map(lambda x, info: {KEY_SPLIT: info, KEY_DATA: x})
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    options.experimental_optimization.map_parallelization = False
    return out.with_options(options)
