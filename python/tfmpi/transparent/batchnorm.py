"""BatchNormalization across ranks.

By default (TFMPI_SYNC_BATCHNORM=1) the moments are computed over the global
batch, so the run is the 1-process run (Note [Synchronized by default]).
With TFMPI_SYNC_BATCHNORM=0 each rank normalises with the moments of its own
slice, as every other data-parallel framework does: training is valid but not
the 1-process run; the moving statistics still agree on every rank (Note
[Moving statistics that agree]).

Note [Synchronized moments]
mean = sum_ranks(sum x) / n and var = sum_ranks(sum (x - mean)^2) / n, as
tf.nn.moments computes them on one process (two passes: the mean first, so
no cancellation). The forward takes two collectives per layer, one after the
other: the sums with the count (one op; the count was a collective of its
own), then the squared deviations around the global mean. Each rank
differentiates its own slice loss L_i and the optimizer applies sum_i w_i
g_i, so the backward of each cross-rank sum must hand rank i (1/w_i) *
sum_k w_k dL_k/dy: then w_i times rank i's gradient contributes exactly its
part of d(sum_k w_k L_k). The backward's two allreduces do not wait for each
other (Note [Concurrent collectives]). Where every rank holds the whole batch
(Note [Batches smaller than the ranks]) the N copies give the same moments
and, weighted 1/N, the same gradient. One collective per layer (every rank's
count, mean and squared deviations allgathered, then combined by Chan et
al.'s parallel formula) measured slower on bn_stack
(docs/performance-history.md, "Synchronized BatchNormalization"): allgathers
keep program order, and each is two MPI calls.

Note [Synchronized by default]
The promise is the 1-process curve, and per-slice moments break it from the
first step of any model with BatchNormalization. Measured (docs/performance.md,
"Synchronized BatchNormalization", bench/sync_batchnorm.py), the synchronized
moments cost a few percent of a step on a small CNN, on one host or across
two, and 12% on ResNet-50 (53 layers) on an oversubscribed 2-core machine;
that is in proportion to what they keep, so they are the default, and
TFMPI_SYNC_BATCHNORM=0 (tfmpirun --no-sync-batchnorm) gives the per-slice
moments for users who want them.

Note [Moving statistics that agree]
With per-slice moments, each rank would fold its own slice's moments into
its moving mean and variance, and the ranks' checkpoints would differ. So
between steps (after fit's train function runs, when a custom loop takes its
next batch or ends) each rank replaces every moving statistic that a training
call updated by sum_i w_i m_i over the ranks, in one collective for all
layers: from equal values before the update, that is the moving average of
sum_i w_i mean_i, the global batch's mean, so the moving mean is the
1-process one (over several steps of one call too, where the slices' weights
stay the same); the moving variance is the moving average of the slices'
weighted variances (without the spread between the slices' means), the same
on every rank. An allreduce per layer inside the step cost ResNet-50 at
-np 2 nearly twice its step time on this machine (the ranks reached each
layer's allreduce at other times, and the step waited for all of them).
"""

import functools

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, collectives, naming, rank0, state, versions


def _sync_sum(x, name):
    """The sum of `x` over ranks; the backward hands rank i (1/w_i) * sum_k w_k
    dL_k/dy (Note [Synchronized moments])."""
    @tf.custom_gradient
    def f(t):
        y = tops.allreduce(t, op="sum", name=name)

        def grad(dy):
            w = tf.cast(batching.weight_variable(), dy.dtype)
            total = tops.allreduce(dy * w, op="sum", name=name + "/grad")
            return tf.math.divide_no_nan(total, w)

        return y, grad

    return f(x)


def global_moments(x, axes, mask=None, epsilon=0.0):
    """(mean, variance) of `x` over `axes` and over every rank's slice, with
    keepdims (Note [Synchronized moments]). With `mask` (broadcast to x's
    shape) only the entries it holds count, and the count gets `epsilon`
    added, as Keras adds it."""
    base = naming.name("bn")  # one per call: a layer called twice in one graph needs two
    if mask is None:
        local_sum = tf.reduce_sum(x, axes, keepdims=True)
        count = tf.reshape(tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), axes)), x.dtype), [1])
    else:
        m = tf.cast(mask, x.dtype)
        local_sum = tf.reduce_sum(x * m, axes, keepdims=True)
        count = tf.reshape(tf.reduce_sum(m, axes, keepdims=True), [-1])
    n = tf.size(count)
    # the sums and the count in one collective
    packed = _sync_sum(tf.concat([tf.reshape(local_sum, [-1]), count], 0), base + "/sum")
    count = packed[-n:] + epsilon
    count = count[0] if mask is None else tf.reshape(count, tf.shape(local_sum))
    mean = tf.reshape(packed[:-n], tf.shape(local_sum)) / count
    deviation = tf.math.squared_difference(x, tf.stop_gradient(mean))
    if mask is not None:
        deviation = deviation * m
    sq = tf.reduce_sum(deviation, axes, keepdims=True)
    return mean, _sync_sum(sq, base + "/sq") / count


def synchronized():
    return state.options.sync_batchnorm and state.size > 1


_trained = {}  # id -> BatchNormalization layer that ran a training call with per-slice moments


def agree_moving_statistics():
    """Eagerly, between steps: every BatchNormalization layer that trained with
    per-slice moments gets sum_i w_i v_i over the ranks for its moving mean
    and variance, in one collective (Note [Moving statistics that agree])."""
    layers = list(_trained.values())
    if not layers or state.size == 1 or rank0.inside():
        return
    moving = [v for layer in layers for v in (getattr(layer, "moving_mean", None),
                                                getattr(layer, "moving_variance", None))
              if v is not None]
    w = batching.weight_variable()
    values = [tf.convert_to_tensor(v) for v in moving]
    summed = collectives.allreduce_sum([t * tf.cast(w, t.dtype) for t in values], "bn_moving")
    for v, s in zip(moving, summed):
        v.assign(s)


def wrap_call(original):
    """BatchNormalization.call, its layer remembered once it trains with
    per-slice moments (agree_moving_statistics makes the ranks' moving
    statistics agree after the step)."""
    @functools.wraps(original)
    def call(self, inputs, *args, **kwargs):
        training = kwargs.get("training", args[0] if args else None)
        if (state.size > 1 and self.trainable and training is not None
                and tf.get_static_value(training) is not False):
            _trained.setdefault(id(self), self)
        return original(self, inputs, *args, **kwargs)

    return call


def install():
    if state.size == 1:
        return
    from keras.src.layers.normalization.batch_normalization import BatchNormalization

    if not synchronized():
        BatchNormalization.call = wrap_call(BatchNormalization.call)
        return
    original = BatchNormalization._moments

    def _moments(self, inputs, mask):
        versions.require_instance(self, ("_reduction_axes",), "BatchNormalization")
        x = tf.convert_to_tensor(inputs)
        dtype = x.dtype
        if dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float32)
        axes = list(self._reduction_axes)
        if mask is None:
            mean, variance = global_moments(x, axes)
        else:  # Keras' masked moments: a mask of one dimension less, over the channels
            from keras.src import backend

            full = tf.broadcast_to(tf.expand_dims(tf.cast(mask, tf.bool), -1), tf.shape(x))
            mean, variance = global_moments(x, axes, full, backend.epsilon())
        mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
        return tf.cast(mean, dtype), tf.cast(variance, dtype)

    BatchNormalization._moments = _moments
