"""tf_keras BatchNormalization with TFMPI_SYNC_BATCHNORM=1: moments over the
global batch (../batchnorm.py, Note [Synchronized moments]). The fused kernel
computes its own moments, so synchronized layers use the unfused path."""

import tensorflow as tf

from tfmpi.transparent import batchnorm, state


def install():
    if not state.options.sync_batchnorm or state.size == 1:
        return
    from tf_keras.src.layers.normalization.batch_normalization import BatchNormalizationBase

    original_build = BatchNormalizationBase.build

    def build(self, input_shape):
        self.fused = False
        return original_build(self, input_shape)

    original_moments = BatchNormalizationBase._calculate_mean_and_var

    def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
        if mask is not None:
            return original_moments(self, inputs, reduction_axes, keep_dims, mask=mask)
        x = tf.convert_to_tensor(inputs)
        dtype = x.dtype
        if dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float32)
        axes = list(reduction_axes)
        mean, variance = batchnorm.global_moments(x, axes)
        if not keep_dims:
            mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
        return tf.cast(mean, dtype), tf.cast(variance, dtype)

    BatchNormalizationBase.build = build
    BatchNormalizationBase._calculate_mean_and_var = _calculate_mean_and_var
