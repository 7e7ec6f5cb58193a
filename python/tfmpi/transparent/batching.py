"""Global-batch semantics: each rank takes a contiguous slice of every batch.

Note [Global batch]
For a batch of B samples, rank i takes s_i = B // N (+1 for the first B % N
ranks) samples starting at sum_{j<i} s_j, so the slices partition the batch in
order, ragged last batch included. Each rank's loss is the mean over its
slice; the optimizer applies sum_i (s_i / B) * g_i (allreduced), which is the
1-process gradient of the mean over B. The weight s_i / B lives in a variable
(state.batch_weight) so one traced graph serves every batch size.

A loss with reduction "sum" is a sum, not a mean, over the slice: the
1-process loss is sum_i L_i and its gradient sum_i g_i. Such a loss is
multiplied by B / s_i on the slice (state.sum_scale; 1 where the batch is not
split), so the weighting above gives back exactly sum_i L_i and sum_i g_i
(losses.py, Note [Loss normalisers]).

Note [Split context]
Code inside a split step sometimes needs the split itself, not only the
weight: random draws are made at the global batch's shape and cut to the
rank's rows (randomness.py). The split is (start, size, total) as int64
tensors. Inside a step Keras compiles, they are the tensors computed by
slice_batch while the step is traced (tracing_split). Custom loops are split
eagerly, outside the functions they call, so there the split is also kept in a
variable (state.split, total 0 when nothing is split) that a traced function
reads when it runs.

Note [Batches smaller than the ranks]
A batch of B >= N rows gives every rank a slice of at least one row (Note
[Work shares]). A batch of B < N rows (a last batch of one row, predicting
one sample) is not split at all: every rank computes it whole, weighted 1/N
(the split is "replicated": start 0, size B, total B, weight 1/N). No rank
ever runs the model on an empty slice, so no op has to handle zero rows (many
of TensorFlow's do not: a transposed convolution on 0 rows fails inside its
kernel). The math stays the 1-process math, as if the batch were N copies of
itself, each weighted 1/N:
- gradients: sum_i (1/N) g = g, the 1-process gradient;
- losses: a mean is the 1-process mean on every rank; a "sum" loss keeps
  scale 1 (sum_i (1/N) L = L, not 1 / w_i); normalisers summed over ranks
  (masks, sample weights) are N times the local one, and so is every
  rank's share of them (losses.py);
- synchronized BatchNormalization sums N copies of the batch's sums and
  counts: the same moments (batchnorm.py);
- random draws: the global shape is the slice's, so every rank draws the
  1-process noise for all B rows (randomness.py);
- metric states would count the batch N times: on every rank but 0, a
  metric's update leaves its state as it was (metrics_patches.count_once);
- predict: rank 0 alone hands in the batch's outputs to the gather
  (steps.sliced_predict).
A sharded pipeline (input_sharding.py, file_sharding.py) hands each rank only
its rows, so where any rank's slice would be empty (B < N, or a rank whose
files ran out), the ranks first allgather their rows (gather_rows): then every
rank holds the global batch and cuts it as above. That costs one allgather of
the batch's rows on such steps only.
"""

import collections
import contextlib
import threading

import tensorflow as tf

from tfmpi.transparent import shares, state

# static_total: the batch size where the trace knows it (None otherwise, and
# for splits made by a sharded pipeline); replicated: a bool tensor, true
# where every rank holds the whole batch (Note [Batches smaller than the ranks]),
# or None where that cannot happen.
Split = collections.namedtuple("Split", "start size total weight static_total replicated",
                               defaults=(None, None))

_local = threading.local()


def _variable(attr, initial, dtype, name):
    return state.variable(attr, lambda: tf.Variable(initial, trainable=False, dtype=dtype, name=name))


def weight_variable():
    """The variable holding this rank's share of the current batch, created on
    first use (creating it at import would initialise TensorFlow's runtime
    before the script can configure threads or devices)."""
    return _variable("batch_weight", 1.0 / state.size, tf.float32, "tfmpi_batch_weight")


def sum_scale_variable():
    """The factor B / s_i for losses with reduction "sum" (1 when unsplit)."""
    return _variable("sum_scale", 1.0, tf.float32, "tfmpi_sum_loss_scale")


def split_variable():
    """[start, size, total, replicated] of the split a custom loop made last
    (total 0: none; replicated 1: every rank holds the whole batch)."""
    return _variable("split", [0, 0, 0, 0], tf.int64, "tfmpi_split")


def batches_per_step_variable():
    """How many ranks' batches a training batch holds: N while fit deals
    per-rank batches by shares (Note [Batches by shares], per_rank.py); 1 in
    train_on_batch, where each rank holds a batch of its own."""
    return _variable("batches_per_step", 1.0, tf.float32, "tfmpi_batches_per_step")


def set_batches_per_step(n):
    """Training batches hold `n` ranks' batches from now on (set eagerly,
    before the step is traced: a variable made by a later trace is refused)."""
    batches_per_step_variable().assign(float(n))


def record_split(split, per_rank=False):
    """This rank holds rows [start, start + size) of a batch of `total`. A
    "sum" loss is scaled to the batch's sum (1 / weight), or in a `per_rank`
    training step to 1/N of it (Note [Batches by shares], per_rank.py)."""
    weight_variable().assign(split.weight)
    parts = float(state.size) if per_rank else 1.0
    scale = tf.math.divide_no_nan(1.0, parts * split.weight)
    if split.replicated is not None:  # N copies of the batch, each 1/N: Note [Batches smaller than the ranks]
        scale = tf.where(split.replicated, tf.constant(1.0 / parts), scale)
    sum_scale_variable().assign(scale)
    split_variable().assign(tf.stack([split.start, split.size, split.total,
                                      _replicated_flag(split)]))


def _replicated_flag(split):
    if split.replicated is None:
        return tf.constant(0, tf.int64)
    return tf.cast(split.replicated, tf.int64)


def record_unsplit(weight):
    """Every rank holds whole batches of its own, weighted `weight` (per-rank mode)."""
    weight_variable().assign(weight)
    sum_scale_variable().assign(1.0)
    if state.split is not None:
        state.split.assign([0, 0, 0, 0])


def reset_weight():
    """Outside sliced loops every rank sees the whole batch: weight 1/N."""
    if state.batch_weight is not None:
        state.batch_weight.assign(1.0 / state.size)
    if state.sum_scale is not None:
        state.sum_scale.assign(1.0)
    if state.split is not None:
        state.split.assign([0, 0, 0, 0])


@contextlib.contextmanager
def tracing_split(split):
    """Marks the trace of a step that runs on `split` (Note [Split context])."""
    previous = getattr(_local, "split", None)
    _local.split = split
    try:
        yield
    finally:
        _local.split = previous


def traced_split():
    """The Split of the step being traced, or None."""
    return getattr(_local, "split", None)


def variable_split():
    """(start, size, total, replicated) read from state.split (total 0: not
    split), or None when no custom loop was ever split."""
    if state.split is None:
        return None
    v = tf.convert_to_tensor(state.split)
    return Split(v[0], v[1], v[2], None, None, tf.logical_and(v[2] > 0, tf.equal(v[3], 1)))


def replicated():
    """A bool tensor, true while every rank holds the whole current batch
    (Note [Batches smaller than the ranks]); None outside a split step and
    before any custom loop was split."""
    split = traced_split()
    if split is None or tf.executing_eagerly():
        split = variable_split()
    if split is None or split.replicated is None:
        return None
    return split.replicated


def all_slice_bounds(batch_size):
    """The N + 1 bounds of every rank's slice of a batch of `batch_size` (an
    int tensor), as slice_bounds cuts it."""
    if shares.enabled():
        return shares.bounds(batch_size)
    i = tf.range(state.size + 1, dtype=batch_size.dtype)
    return i * (batch_size // state.size) + tf.minimum(i, batch_size % state.size)


def slice_bounds(batch_size):
    """(start, size) of this rank's slice of a batch of `batch_size` (int tensors):
    from the work shares (shares.py) where they are adaptive, else B // N each."""
    if shares.enabled():
        return shares.slice_bounds(batch_size)
    n, r = state.size, state.rank
    base = batch_size // n
    rem = batch_size % n
    start = r * base + tf.minimum(tf.constant(r, batch_size.dtype), rem)
    size = base + tf.cast(r < rem, batch_size.dtype)
    return start, size


def _first_batched(data):
    for t in tf.nest.flatten(data):
        if isinstance(t, tf.RaggedTensor) or (isinstance(t, tf.Tensor) and t.shape.rank != 0):
            return t
    return None


def _rows(t):
    """The leading dimension of a batched tensor, as an int64 tensor."""
    if isinstance(t, tf.RaggedTensor):
        return t.nrows(out_type=tf.int64)
    return tf.shape(t, out_type=tf.int64)[0]


def leading_dim(data):
    """The batch size of `data` (an int64 tensor), or None if nothing is batched."""
    t = _first_batched(data)
    return None if t is None else _rows(t)


def slice_batch(data, whole=None):
    """This rank's slice of every batched tensor in `data`, and its Split;
    where `whole` (a bool tensor) holds, the whole batch, weighted 1/N (a
    batch of this rank's own in per-rank mode, Note [Batches by shares],
    per_rank.py). A batch of fewer rows than ranks is not split: every rank
    takes it whole, weighted 1/N (Note [Batches smaller than the ranks]).

    Works eagerly and in graph mode. Returns (data, None) when nothing in
    `data` has a batch dimension.
    """
    first = _first_batched(data)
    if first is None:
        return data, None
    batch = _rows(first)
    start, size = slice_bounds(batch)
    replicated = tf.less(batch, tf.constant(state.size, batch.dtype))
    if whole is None:
        whole = replicated
    else:  # a batch of the rank's own is not the others'
        replicated = tf.logical_and(tf.logical_not(whole), replicated)
        whole = tf.logical_or(whole, replicated)
    start, size = tf.where(whole, tf.zeros_like(start), start), tf.where(whole, batch, size)

    def cut(t):
        if isinstance(t, (tf.Tensor, tf.RaggedTensor)) and t.shape.rank != 0:
            return t[start:start + size]
        return t

    weight = tf.math.divide_no_nan(tf.cast(size, tf.float32), tf.cast(batch, tf.float32))
    weight = tf.where(whole, tf.constant(1.0 / state.size), weight)
    static = tf.compat.dimension_value(first.shape[0])
    return tf.nest.map_structure(cut, data), Split(start, size, batch, weight, static, replicated)


def gather_rows(data, name):
    """Every rank's rows of the batched tensors in `data`, in rank order: the
    global batch of which each rank holds a contiguous slice (Note [Batches
    smaller than the ranks]). `name` (shared by the ranks) names the
    collectives. Works eagerly and in graph mode. Dtypes the engine does not
    move travel as their bytes (strings: their lengths and bytes)."""
    from tfmpi.tensorflow import ops as tops
    from tfmpi.transparent.collectives import NATIVE

    def gather(i, t):
        key = f"{name}/{i}"
        if not isinstance(t, tf.Tensor) or t.shape.rank == 0:
            return t
        if t.dtype in NATIVE:
            return tops.allgather(t, name=key)
        if t.dtype == tf.string:
            return _gather_strings(t, key)
        as_bytes = tf.bitcast(t, tf.uint8)  # [rows, ..., itemsize]
        return tf.bitcast(tops.allgather(as_bytes, name=key), t.dtype)

    flat = tf.nest.flatten(data)
    return tf.nest.pack_sequence_as(data, [gather(i, t) for i, t in enumerate(flat)])


def _gather_strings(t, key):
    """allgather of a string tensor: its byte lengths and its bytes."""
    from tfmpi.tensorflow import ops as tops

    inner = tf.shape(t, out_type=tf.int64)[1:]
    flat = tf.reshape(t, [-1])
    lengths = tf.strings.length(flat, unit="BYTE")
    data = tf.io.decode_raw(tf.strings.reduce_join(flat), tf.uint8)
    all_lengths = tops.allgather(tf.cast(lengths, tf.int64), name=key + "/lengths")
    all_data = tops.allgather(tf.reshape(data, [-1]), name=key + "/bytes")
    one_byte = tf.constant([bytes([b]) for b in range(256)])
    chars = tf.RaggedTensor.from_row_lengths(tf.gather(one_byte, tf.cast(all_data, tf.int32)),
                                             all_lengths)
    return tf.reshape(tf.strings.reduce_join(chars, axis=1), tf.concat([[-1], inner], 0))
