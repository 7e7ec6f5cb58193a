"""Gradient averaging at the one point every Keras 3 training path passes:
optimizer.apply (apply_gradients calls it; so does model.fit's train_step).

Note [Where gradients are reduced]
The wrapper reduces sum_i w_i * g_i (w_i = this rank's share of the global
batch, batching.py) before the wrapped apply runs, so clipping, weight decay,
loss-scale finiteness checks and the update itself all see the global
gradient, as in the 1-process run. LossScaleOptimizer overrides apply and
calls its inner optimizer's apply: the outermost wrapper reduces, nested ones
pass through, so no rank can disagree on the finite check. Before the first
update, the variables being trained are broadcast from rank 0. With
TFMPI_SHARDED_UPDATE=1 the gradients go to their variables' owners instead,
and each rank updates its own variables (Note [Sharded update],
sharded_update.py).
"""

import tensorflow as tf

from tfmpi.transparent import (batching, collectives, flags, gradient_tape, shares, sharded_update,
                               state, versions)


def reducing():
    """Marks the wrapped apply of an outer optimizer: nested ones pass through."""
    return flags.inside("reducing")


def _sync_before_first_update(opt, variables):
    if tf.executing_eagerly():
        if not getattr(opt, "_tfmpi_synced", False):
            collectives.broadcast_variables(variables)
            object.__setattr__(opt, "_tfmpi_synced", True)
        return
    with tf.init_scope():  # an optimizer may create its step counter on first use
        iterations = opt.iterations
    tf.cond(tf.equal(iterations, 0),
            lambda: collectives.broadcast_variables(variables),
            tf.no_op)


def passes_through():
    """True inside an outer wrapper (nested optimizers) or with one rank."""
    return flags.active("reducing") or state.size == 1


def _before_update(opt, variables):
    _sync_before_first_update(opt, variables)
    shares.record_samples(batching.traced_split())


def reduced_gradients(opt, grads, variables):
    """The global gradient for `variables` (broadcasting them first on the
    optimizer's first update)."""
    _before_update(opt, variables)
    return collectives.reduce_gradients(grads, batching.weight_variable())


def wrap_apply(original):
    def apply(self, grads, trainable_variables=None):
        if passes_through():
            return original(self, grads, trainable_variables)
        grads = list(grads)
        if not grads:
            return original(self, grads, trainable_variables)
        if trainable_variables is None:
            versions.require_instance(self, ["_trainable_variables"], type(self).__name__)
            variables = list(self._trainable_variables)
        else:
            trainable_variables = list(trainable_variables)
            variables = trainable_variables
        _before_update(self, variables)
        weight = batching.weight_variable()
        if sharded_update.enabled() and sharded_update.apply(self, original, grads, variables,
                                                             weight, reducing):
            # gradients the tape reduced (its first step, before the optimizer was
            # known to be sharded) go to the owners too: sum_i w_i G = G
            gradient_tape.reduced_for(variables)
            return None
        if gradient_tape.reduced_for(variables):  # Note [Gradients reduced at the tape]
            with reducing():
                return original(self, grads, trainable_variables)
        reduced = collectives.reduce_gradients(grads, weight)
        with reducing():
            return original(self, reduced, trainable_variables)

    apply._tfmpi_wrapped = True
    return apply


def install():
    from keras.src.optimizers import base_optimizer, loss_scale_optimizer

    for cls in (base_optimizer.BaseOptimizer, loss_scale_optimizer.LossScaleOptimizer):
        if not getattr(cls.apply, "_tfmpi_wrapped", False):
            cls.apply = wrap_apply(cls.apply)
