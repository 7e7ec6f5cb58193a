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
(metrics_patches.wrap_loss_call).
"""

import tensorflow as tf

from tfmpi.transparent import state


def weight_variable():
    """The variable holding this rank's share of the current batch, created on
    first use (creating it at import would initialise TensorFlow's runtime
    before the script can configure threads or devices)."""
    if state.batch_weight is None:
        with tf.init_scope():
            state.batch_weight = tf.Variable(1.0 / state.size, trainable=False, dtype=tf.float32,
                                             name="tfmpi_batch_weight")
    return state.batch_weight


def sum_scale_variable():
    """The factor B / s_i for losses with reduction "sum" (1 when unsplit)."""
    if state.sum_scale is None:
        with tf.init_scope():
            state.sum_scale = tf.Variable(1.0, trainable=False, dtype=tf.float32,
                                          name="tfmpi_sum_loss_scale")
    return state.sum_scale


def record_share(weight):
    """This rank holds the share `weight` = s_i / B of the current batch."""
    weight_variable().assign(weight)
    sum_scale_variable().assign(tf.math.divide_no_nan(1.0, weight))


def reset_weight():
    """Outside sliced loops every rank sees the whole batch: weight 1/N."""
    if state.batch_weight is not None:
        state.batch_weight.assign(1.0 / state.size)
    if state.sum_scale is not None:
        state.sum_scale.assign(1.0)


def slice_bounds(batch_size):
    """(start, size) of this rank's slice of a batch of `batch_size` (int tensors)."""
    n, r = state.size, state.rank
    base = batch_size // n
    rem = batch_size % n
    start = r * base + tf.minimum(r, rem)
    size = base + tf.cast(r < rem, batch_size.dtype)
    return start, size


def _leading_dim(data):
    for t in tf.nest.flatten(data):
        if isinstance(t, (tf.Tensor, tf.RaggedTensor)) and t.shape.rank != 0:
            if isinstance(t, tf.RaggedTensor):
                return t.nrows(out_type=tf.int32)
            return tf.shape(t, out_type=tf.int32)[0]
    return None


def slice_batch(data):
    """This rank's slice of every batched tensor in `data`, and its weight s_i / B.

    Works eagerly and in graph mode. Returns (data, None) when nothing in
    `data` has a batch dimension.
    """
    batch = _leading_dim(data)
    if batch is None:
        return data, None
    start, size = slice_bounds(batch)

    def cut(t):
        if isinstance(t, (tf.Tensor, tf.RaggedTensor)) and t.shape.rank != 0:
            return t[start:start + size]
        return t

    weight = tf.math.divide_no_nan(tf.cast(size, tf.float32), tf.cast(batch, tf.float32))
    return tf.nest.map_structure(cut, data), weight
