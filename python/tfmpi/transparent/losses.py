"""Losses under a split batch: the value every rank reports is the 1-process
loss, and the gradients the optimizer combines are those of the 1-process loss.

Note [Loss normalisers]
The optimizer applies sum_i w_i g_i with w_i = s_i / B (Note [Global batch],
batching.py), so a rank's loss L_i gives the 1-process loss exactly when
sum_i w_i L_i is it. A loss is a weighted sum over its elements divided by a
normaliser D:
- D = the number of elements ("sum_over_batch_size", "mean", a plain mean): D
  is proportional to the slice, D_i = w_i D, and L_i needs no change;
- D = 1 (reduction "sum"): L_i is multiplied by B / s_i (= 1 / w_i);
- D = a fixed global batch size (`tf.nn.compute_average_loss(...,
  global_batch_size=B)`): the same factor B / s_i;
- D = the sum of the sample weights ("mean_with_sample_weight") or the number
  of unmasked entries (a masked "mean" / "sum_over_batch_size"): D_i is not
  proportional to the slice, so D is summed over the ranks (one scalar
  allreduce) and L_i = (S_i / D) / w_i. The same holds where the batch is not
  split (w_i = 1/N, every rank's D is D: the sum is N D).
A loss written by hand is none of these, and the rule above applies to it as
written: a mean over the slice (tf.reduce_mean) is exact; a sum, or a sum
divided by a constant (tf.reduce_sum(l) / 40), contributes w_i times its slice
value, i.e. the 1-process value scaled by s_i / B per rank.
A Keras Loss returns the global value sum_i w_i L_i (one allreduce) with the
local gradient, so a custom loop that prints its loss prints the 1-process
loss.
"""

import functools
import threading

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, collectives, flags, naming, rank0, state


def globalize(local):
    """sum over ranks of w_i * local, with the local gradient."""
    name = naming.name("loss")

    @tf.custom_gradient
    def f(x):
        weighted = x * tf.cast(batching.weight_variable(), x.dtype)
        total = tops.allreduce(weighted, op="sum", name=name)

        def grad(upstream):  # the optimizer weights and sums the local gradients
            return upstream

        return total, grad

    return f(local)


def _global_sum(x):
    return collectives.allreduce_sum([x], "lossnorm")[0]


def _in_loss():
    return flags.active("loss") and state.size > 1 and not rank0.inside()


def wrap_loss_call(original):
    @functools.wraps(original)
    def __call__(self, y_true, y_pred, sample_weight=None):
        if state.size == 1 or rank0.inside():
            return original(self, y_true, y_pred, sample_weight)
        nested = flags.active("loss")
        with flags.inside("loss"):
            local = original(self, y_true, y_pred, sample_weight)
        if getattr(local, "shape", None) is None or local.shape.rank != 0:
            return local  # reduction="none": per-sample values stay local
        if str(getattr(self, "reduction", "")).lower() == "sum":
            local = local * tf.cast(batching.sum_scale_variable(), local.dtype)
        if nested or flags.active("local_loss"):
            return local  # Note [Local losses in Keras' own steps], steps.py
        return globalize(local)

    __call__._tfmpi_wrapped = True
    return __call__


_calls = threading.local()


def _keras_compile_loss_call(original):
    """Keeps the CompileLoss being called, so its per-output loss trackers
    are known while they update (_keras_per_output_mean)."""
    @functools.wraps(original)
    def call(self, *args, **kwargs):
        _calls.compile_losses = getattr(_calls, "compile_losses", ()) + (self,)
        try:
            return original(self, *args, **kwargs)
        finally:
            _calls.compile_losses = _calls.compile_losses[:-1]

    return call


def _keras_per_output_mean(original):
    """Keras 3's CompileLoss tracks each output's loss of a multi-output model
    in a Mean weighted by the static size of the step's batch, or 1 where the
    trace does not know it. A local value L_i (Note [Local losses in Keras'
    own steps]) must weigh w_i W, W being that 1-process weight, for the sum
    over ranks to give the 1-process state: where the slice's static size is
    s_i = w_i B it is already given, otherwise (None) it is supplied here."""
    @functools.wraps(original)
    def update_state(self, values, sample_weight=None, *args, **kwargs):
        stack = getattr(_calls, "compile_losses", ())
        split = batching.traced_split()
        if (sample_weight is None and stack and split is not None and flags.active("local_loss")
                and any(m is self for m in getattr(stack[-1], "metrics", ()))):
            weight = split.weight
            if split.replicated is not None:  # counted on rank 0 alone (metrics_patches.count_once)
                weight = tf.where(split.replicated, tf.constant(1.0), weight)
            sample_weight = weight * float(split.static_total or 1)
        return original(self, values, sample_weight, *args, **kwargs)

    return update_state


def _mask_factor(mask, dtype):
    """(global total / global valid) / (local total / local valid) for a mask."""
    m = tf.cast(mask, dtype)
    local = tf.stack([tf.cast(tf.size(m), dtype), tf.reduce_sum(m)])
    total = _global_sum(local)
    return tf.stop_gradient(tf.math.divide_no_nan(tf.math.divide_no_nan(total[0], total[1]),
                                                  tf.math.divide_no_nan(local[0], local[1])))


def _keras_apply_mask(original):
    @functools.wraps(original)
    def apply_mask(sample_weight, mask, dtype, reduction):
        merged = original(sample_weight, mask, dtype, reduction)
        if mask is None or merged is None or reduction not in ("mean", "sum_over_batch_size") \
                or not _in_loss():
            return merged
        return merged * tf.cast(_mask_factor(mask, merged.dtype), merged.dtype)

    return apply_mask


def _keras_reduce_values(original):
    @functools.wraps(original)
    def reduce_values(values, sample_weight=None, reduction="sum_over_batch_size"):
        out = original(values, sample_weight, reduction)
        if reduction != "mean_with_sample_weight" or sample_weight is None or not _in_loss() \
                or out.shape.rank != 0 or tuple(values.shape) in ((), (0,)):
            return out
        local = tf.cast(tf.reduce_sum(sample_weight), out.dtype)
        total = _global_sum(local)
        w = tf.cast(batching.weight_variable(), out.dtype)
        return out * tf.stop_gradient(tf.math.divide_no_nan(local, total * w))

    return reduce_values


def _tf_keras_apply_valid_mask(original, reductions):
    @functools.wraps(original)
    def apply_valid_mask(losses, sw, mask, reduction):
        merged = original(losses, sw, mask, reduction)
        if mask is None or merged is None or reduction not in reductions or not _in_loss():
            return merged
        return merged * tf.cast(_mask_factor(mask, merged.dtype), merged.dtype)

    return apply_valid_mask


def _wrap_compute_average_loss(original):
    @functools.wraps(original)
    def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
        local = original(per_example_loss, sample_weight=sample_weight,
                         global_batch_size=global_batch_size)
        if global_batch_size is None or state.size == 1 or rank0.inside():
            return local  # a mean over the slice: exact as it is
        return globalize(local * tf.cast(batching.sum_scale_variable(), local.dtype))

    compute_average_loss._tfmpi_wrapped = True
    return compute_average_loss


def install_tensorflow(tf_module):
    nn = tf_module.nn
    if not getattr(nn.compute_average_loss, "_tfmpi_wrapped", False):
        nn.compute_average_loss = _wrap_compute_average_loss(nn.compute_average_loss)


def install_keras():
    from keras.src.losses import loss
    from keras.src.metrics import reduction_metrics
    from keras.src.trainers import compile_utils

    compile_utils.CompileLoss.call = _keras_compile_loss_call(compile_utils.CompileLoss.call)
    reduction_metrics.Mean.update_state = _keras_per_output_mean(
        reduction_metrics.Mean.update_state)
    loss.apply_mask = _keras_apply_mask(loss.apply_mask)
    loss.reduce_values = _keras_reduce_values(loss.reduce_values)
    if not getattr(loss.Loss.__call__, "_tfmpi_wrapped", False):
        loss.Loss.__call__ = wrap_loss_call(loss.Loss.__call__)


def install_tf_keras():
    from tf_keras.src.losses import Loss
    from tf_keras.src.utils import losses_utils

    reductions = (losses_utils.ReductionV2.AUTO, losses_utils.ReductionV2.SUM_OVER_BATCH_SIZE)
    losses_utils.apply_valid_mask = _tf_keras_apply_valid_mask(losses_utils.apply_valid_mask,
                                                               reductions)
    if not getattr(Loss.__call__, "_tfmpi_wrapped", False):
        Loss.__call__ = wrap_loss_call(Loss.__call__)
