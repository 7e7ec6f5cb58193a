"""BatchNormalization across ranks.

By default each rank normalises with the statistics of its own slice (like
every data-parallel framework): training is valid, but the result differs
from the 1-process run. With TFMPI_SYNC_BATCHNORM=1 the moments are computed
over the global batch, matching the 1-process run.

Note [Synchronized moments]
mean = sum_ranks(sum x) / n and var = sum_ranks(sum (x - mean)^2) / n, as
tf.nn.moments computes them on one process. Each rank differentiates its own
slice loss L_i and the optimizer applies sum_i w_i g_i, so the backward of the
cross-rank sum must hand rank i (1/w_i) * sum_k w_k dL_k/dy: then w_i times
rank i's gradient contributes exactly its part of d(sum_k w_k L_k).
"""

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, naming, state, versions


def _sync_sum(x, name):
    @tf.custom_gradient
    def f(t):
        y = tops.allreduce(t, op="sum", name=name)

        def grad(dy):
            w = tf.cast(batching.weight_variable(), dy.dtype)
            total = tops.allreduce(dy * w, op="sum", name=name + "/grad")
            return tf.math.divide_no_nan(total, w)

        return y, grad

    return f(x)


def global_moments(x, axes):
    base = naming.name("bn")  # one per call: a layer called twice in one graph needs two
    shape = tf.shape(x)
    count = tf.cast(tf.reduce_prod(tf.gather(shape, axes)), x.dtype)
    count = tops.allreduce(tf.reshape(count, [1]), op="sum", name=base + "/n")[0]
    total = _sync_sum(tf.reduce_sum(x, axes, keepdims=True), base + "/sum")
    mean = total / count
    sq = tf.reduce_sum(tf.math.squared_difference(x, tf.stop_gradient(mean)), axes, keepdims=True)
    variance = _sync_sum(sq, base + "/sq") / count
    return mean, variance


def install():
    if not state.options.sync_batchnorm or state.size == 1:
        return
    from keras.src.layers.normalization.batch_normalization import BatchNormalization

    original = BatchNormalization._moments

    def _moments(self, inputs, mask):
        if mask is not None:
            return original(self, inputs, mask)
        versions.require_instance(self, ("_reduction_axes",), "BatchNormalization")
        x = tf.convert_to_tensor(inputs)
        dtype = x.dtype
        if dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float32)
        axes = list(self._reduction_axes)
        mean, variance = global_moments(x, axes)
        mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
        return tf.cast(mean, dtype), tf.cast(variance, dtype)

    BatchNormalization._moments = _moments
