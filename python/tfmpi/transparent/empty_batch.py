"""Convolutions over an empty slice.

Note [Empty slices]
A rank's slice of a batch is empty when the batch has fewer rows than there
are ranks (Note [Work shares] gives every rank a row otherwise). The rank
still runs the step, on tensors with 0 rows. TensorFlow 2.21's oneDNN
convolutions (the CPU default) return a tensor of their *input's* shape for
an empty batch (tf.nn.conv2d(zeros([0, 8, 8, 1]), 3x3x1x8 filter) has shape
[0, 8, 8, 1], not [0, 6, 6, 8]), and the first op that checks shapes, often a
gradient, fails on that rank. Inside a split step, tf.nn.convolution,
conv1d/2d/3d, depthwise_conv2d, separable_conv2d and conv_transpose are
wrapped: on an empty batch the output is the op applied to one row of zeros,
cut to 0 rows (the right shape, and zero gradients), otherwise the op's own
output. The branch is made only where the slice's rows are unknown when the
step is traced; where they are known (equal shares and a batch the ranks
divide) the wrapper picks the right output directly: a branch there gave the
model's output 0 rows in the trace, and the loss failed on a shape mismatch.
A NaN from a mean over no rows is handled where metrics are updated
(metrics_patches.py).
"""

import functools
import inspect

import tensorflow as tf

from tfmpi.transparent import batching, rank0, state

# tf.nn.<name>, each taking the batch as its `input` argument
_OPS = ("convolution", "conv1d", "conv2d", "conv3d", "depthwise_conv2d", "separable_conv2d",
        "conv_transpose", "conv2d_transpose", "conv3d_transpose", "conv1d_transpose")


def _in_split():
    if state.size == 1 or rank0.inside():
        return False
    return batching.traced_split() is not None or state.custom_split_seen


def _wrap(original, arg="input"):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if not _in_split():
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        x = bound.arguments.get(arg)
        if not tf.is_tensor(x) or x.shape.rank is None or x.shape.rank < 3:
            return original(*args, **kwargs)
        out = original(*args, **kwargs)

        def on_empty():
            bound.arguments[arg] = tf.zeros(tf.concat([[1], tf.shape(x)[1:]], 0), x.dtype)
            return original(*bound.args, **bound.kwargs)[:0]

        rows = x.shape[0]
        if rows is not None:  # known (eagerly, or a slice of static size): no branch needed
            return on_empty() if rows == 0 else out
        return tf.cond(tf.equal(tf.shape(x)[0], 0), on_empty, lambda: out)

    wrapper._tfmpi_wrapped = True
    return wrapper


def install_tensorflow(tf_module):
    from tfmpi.transparent.randomness import replace_api

    for name in _OPS:
        replace_api(tf_module.nn, name, _wrap)
