"""tf_keras BatchNormalization: moments over the global batch by default
(../batchnorm.py, Note [Synchronized moments], Note [Synchronized by
default]). The fused kernel computes its own moments, so synchronized layers
use the unfused path. With TFMPI_SYNC_BATCHNORM=0 the moments are per slice
and the moving statistics are made to agree after each training call (Note
[Moving statistics that agree])."""

import tensorflow as tf

from tfmpi.transparent import batchnorm, state


def install():
    if state.size == 1:
        return
    from tf_keras.src.layers.normalization.batch_normalization import BatchNormalizationBase

    if not batchnorm.synchronized():
        BatchNormalizationBase.call = batchnorm.wrap_call(BatchNormalizationBase.call)
        return
    original_build = BatchNormalizationBase.build

    def build(self, input_shape):
        self.fused = False
        return original_build(self, input_shape)

    def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
        x = tf.convert_to_tensor(inputs)
        dtype = x.dtype
        if dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float32)
        axes = list(reduction_axes)
        full = None
        if mask is not None:  # tf_keras weighs each entry by its mask (weighted_moments)
            full = tf.broadcast_to(tf.expand_dims(tf.cast(mask, tf.bool), -1), tf.shape(x))
        mean, variance = batchnorm.global_moments(x, axes, full)
        if not keep_dims:
            mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
        return tf.cast(mean, dtype), tf.cast(variance, dtype)

    BatchNormalizationBase.build = build
    BatchNormalizationBase._calculate_mean_and_var = _calculate_mean_and_var
