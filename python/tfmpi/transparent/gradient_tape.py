"""Custom loops written with TensorFlow alone: gradients reduced where the tape
computes them, and means of the batch that are the global batch's.

Note [Gradients reduced at the tape]
A custom loop may update its variables by hand (`v.assign_sub(lr * g)`, the
style of TensorFlow's own guides) or through any optimizer, so the reduction
in Keras' optimizers (Note [Where gradients are reduced]) would leave such a
loop training each rank on its own slice. So GradientTape.gradient, called by
the script's own code, reduces the gradients of the variables among its
sources: sum_i w_i g_i over the ranks (w_i: the rank's share of the batch),
the 1-process gradient, before anything uses them. Not reduced:
- gradients with respect to tensors (an input's gradient for a penalty, a
  saliency map): values per row of the slice;
- inside Keras' own loops (fit / evaluate / predict reduce in the optimizer),
  in rank-0 sections, and under an outer tape that is still recording (a
  gradient of a gradient would have to differentiate the reduction);
- the variables a sharded optimizer updates (Note [Sharded update]): their
  gradients go to their owners there.
Gradients combined from reduced ones (clipped, accumulated over several
batches, scaled) are the same on every rank. An optimizer given gradients
for variables whose gradients the tape reduced does not reduce them again
(reduced_for). Where every rank holds the same batch (a loop fed numpy
arrays, a batch smaller than N) the weights are 1/N and the reduction gives
the gradient back. Before the first reduction of a variable, the variables
are made equal to rank 0's (they are already, from the shared seed, unless
the script initialised them from an unseeded source; rank 0 then says
which).

Note [Means of the batch]
A loss written by hand, `tf.reduce_mean(tf.square(model(x) - y))`, is a mean
over the rank's slice; the script reads it (prints it, logs it, decides on
it), so it must be the 1-process value. A tf.reduce_mean over all axes of a
tensor whose rows are the batch's (its leading dimension is the slice's
size, checked when it runs), taken while a tape records inside a custom
loop's split step, returns sum_i w_i m_i over the ranks (one allreduce):
the mean over the global batch. Its gradient hands every rank the weighted
sum of the ranks' upstream gradients (a second allreduce), so any use of
the mean, not only as the loss, differentiates as in the 1-process run (the
mean of a batch subtracted from each row, a square of the loss). Keras'
losses and metrics compute their own means (Note [Loss normalisers]).
"""

import functools
import sys

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import (batching, collectives, flags, loops, naming, rank0, sharded_update,
                               state)

# (graph or None for eager, id(variable)) -> variable, for the variables whose
# gradients the tape reduced and no optimizer has applied yet
_reduced = {}
_equal = set()  # ids of variables made equal to rank 0's
_trained = {}   # id -> variable, every variable whose gradient the tape reduced, in order


def _scope():
    if tf.executing_eagerly():
        return None
    return id(tf.compat.v1.get_default_graph())


def reduced_for(variables):
    """True where the tape reduced the gradients of every one of `variables`
    in this step (or function being traced); they are forgotten then."""
    scope = _scope()
    keys = [(scope, id(v)) for v in variables]
    if not keys or not all(k in _reduced for k in keys):
        return False
    for k in keys:
        _reduced.pop(k, None)
    return True


def forget():
    """A custom loop's pass ended: nothing is pending."""
    _reduced.clear()


def trained_variables():
    """The variables whose gradients the tape reduced so far (Note [Weight agreement])."""
    return list(_trained.values())


def _outer_tape_recording():
    from tensorflow.python.eager import record

    return record.could_possibly_record()


def _reducing_here():
    return (state.size > 1 and not loops.inside_keras_loop() and not rank0.inside()
            and not flags.active("reducing") and not _outer_tape_recording())


def _is_variable(source):
    """A trainable tf.Variable, or a Keras 3 variable (which is not a tf.Variable)."""
    if isinstance(source, tf.Variable):
        return getattr(source, "trainable", True)
    return (type(source).__module__.startswith("keras.") and hasattr(source, "assign")
            and bool(getattr(source, "trainable", False)))


def _make_equal(variables):
    """Broadcast from rank 0 the variables not made equal yet; rank 0 names the
    first that differed, if any did."""
    fresh = [v for v in variables if id(v) not in _equal]
    if not fresh:
        return
    if tf.executing_eagerly():
        from tfmpi.transparent import batch_check

        prints = [batch_check.fingerprint(tf.convert_to_tensor(v))[0] for v in fresh]
        gathered = tops.allgather(tf.stack(prints)[None], name=naming.name("tape_equal")).numpy()
        differ = [v for k, v in enumerate(fresh) if any(gathered[:, k] != gathered[0, k])]
        if differ and state.rank == 0:
            name = getattr(differ[0], "path", None) or differ[0].name
            print(f"tfmpi: note: variable {name!r} (and {len(differ) - 1} more) "
                  "differed across ranks before its first update (initialised from a source the "
                  "shared seed does not reach): made equal to rank 0's; the first step's "
                  "gradient was computed from each rank's own values.", file=sys.stderr)
    collectives.broadcast_variables(fresh)
    _equal.update(id(v) for v in fresh)


def wrap_gradient(original):
    @functools.wraps(original)
    def gradient(self, target, sources, *args, **kwargs):
        grads = original(self, target, sources, *args, **kwargs)
        if not _reducing_here():
            return grads
        flat_sources, flat = tf.nest.flatten(sources), tf.nest.flatten(grads)
        at = [i for i, (s, g) in enumerate(zip(flat_sources, flat))
              if g is not None and _is_variable(s) and not sharded_update.updated_by_owners(s)]
        if not at:
            return grads
        variables = [flat_sources[i] for i in at]
        if tf.executing_eagerly():
            _make_equal(variables)
        else:
            with tf.init_scope():
                _make_equal(variables)
        reduced = collectives.reduce_gradients([flat[i] for i in at], batching.weight_variable())
        scope = _scope()
        for i, r, v in zip(at, reduced, variables):
            flat[i] = r
            _reduced[(scope, id(v))] = v
            _trained.setdefault(id(v), v)
        return tf.nest.pack_sequence_as(grads, flat)

    gradient._tfmpi_wrapped = True
    return gradient


def global_mean(local, upstream_name):
    """sum_i w_i * local over the ranks; the backward hands each rank sum_k w_k
    of the ranks' upstream gradients (Note [Means of the batch])."""
    name = naming.name(upstream_name)

    @tf.custom_gradient
    def f(x):
        w = tf.cast(batching.weight_variable(), x.dtype)
        total = tops.allreduce(x * w, op="sum", name=name)

        def grad(upstream):
            return tops.allreduce(upstream * tf.cast(batching.weight_variable(), upstream.dtype),
                                  op="sum", name=name + "/grad")

        return total, grad

    return f(local)


def _batch_mean_here(x, axis):
    return (axis is None and state.size > 1 and state.options.batch_mode == "global"
            and state.custom_split_seen and not loops.inside_keras_loop() and not rank0.inside()
            and not flags.active("loss") and not flags.active("metric_update")
            and not flags.active("no_batch_draws")
            and _outer_tape_recording() and tf.is_tensor(x) and x.shape.rank is not None
            and x.shape.rank >= 1 and x.dtype.is_floating)


def wrap_reduce_mean(original):
    @functools.wraps(original)
    def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
        local = original(input_tensor, axis, keepdims, name)
        x = input_tensor
        if not _batch_mean_here(x, axis):
            return local
        split = batching.variable_split()
        rows = tf.shape(x, out_type=tf.int64)[0]
        is_batch = tf.logical_and(split.total > 0, tf.equal(rows, split.size))
        with flags.inside("loss"):  # the mean of the allreduce's inputs is not a batch's
            total = global_mean(local, "batch_mean")
        return tf.where(is_batch, total, local)

    reduce_mean._tfmpi_wrapped = True
    return reduce_mean


def install_tensorflow(tf_module):
    from tensorflow.python.eager import backprop

    from tfmpi.transparent.randomness import replace_api

    if state.size == 1:
        return
    if not getattr(backprop.GradientTape.gradient, "_tfmpi_wrapped", False):
        backprop.GradientTape.gradient = wrap_gradient(backprop.GradientTape.gradient)
    if state.options.batch_mode == "global":
        replace_api(tf_module.math, "reduce_mean", wrap_reduce_mean)
