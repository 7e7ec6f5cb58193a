"""Pieces shared by the Keras 3 and tf_keras trainer patches: the step
functions each rank runs (a slice of the global batch, or in per-rank mode its
own batch or its share of the ranks' batches put together), the wrapper that marks Keras' own loops, and the broadcast of a
model's state.

The steps are installed on the model instance (install_steps), where Keras
looks them up when it makes or traces its step functions, so a train_step
the script overrides is wrapped too and Keras' own methods run unchanged.
Evaluation and prediction split the batch in both batch modes, so every
sample is counted once (Note [Global metrics], metrics_patches.py).
"""

import contextlib
import functools
import sys

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import (batch_check, batching, batchnorm, collectives, flags, input_sharding,
                               loops, naming, shares, sharded_update, state, weight_check)
from tfmpi.transparent import per_rank as per_rank_mode

STEPS = ("train_step", "test_step", "predict_step")

# Note [Local losses in Keras' own steps]
# A Keras Loss returns the global value sum_i w_i L_i (one allreduce, Note
# [Loss normalisers], losses.py), so that whatever the script does with it
# sees the 1-process loss. Keras' own train_step and test_step use the value
# in two places only: the gradient, which is the local one either way, and
# the loss tracker, a Mean updated with sample weight s_i (the slice's rows).
# Summed over ranks, the tracker's state is the same with the local value:
# sum_i s_i L_i = B sum_i w_i L_i, and Keras' compute_loss is a weighted sum
# of the Loss values and the model's own losses, so the equality carries over
# to what it returns. The tracker's state is summed with the other metric
# states when a result is read (Note [Global metrics]). So in these steps
# (with Keras' own compute_loss) a Loss stays local, and a training step runs
# no loss collective: its metric states no longer wait for one, and go out
# while the gradients do. A train_step or compute_loss the script overrides
# may use the value in other ways, and keeps the global loss.

# classes whose train_step / test_step / compute_loss are Keras' own -> a
# function making the fused train step for a model (or None)
_OWN_STEPS = {}


def register_own_steps(cls, fused_train_step=None):
    """`cls` (Keras 3's TensorFlowTrainer, tf_keras' Model) defines the
    default train_step, test_step and compute_loss; `fused_train_step(model)`
    makes its train_step with one collective (Note [One collective per step],
    keras_step.py), for models that also keep Keras' compute_metrics."""
    _OWN_STEPS[cls] = fused_train_step


def _own_steps_class(model, name):
    """The registered class whose `name` and compute_loss `model` uses, or None."""
    if name not in ("train_step", "test_step"):
        return None
    kind = type(model)
    for cls in _OWN_STEPS:
        if getattr(kind, name, None) is getattr(cls, name) \
                and getattr(kind, "compute_loss", None) is getattr(cls, "compute_loss", None):
            return cls
    return None


def keeps_losses_local(model, name):
    """True where `name` on `model` is Keras' own step with Keras' own
    compute_loss (Note [Local losses in Keras' own steps])."""
    return _own_steps_class(model, name) is not None


def _fused_train_step(model):
    """The one-collective train step for `model`, or None where it does not apply."""
    cls = _own_steps_class(model, "train_step")
    fused = _OWN_STEPS.get(cls) if cls is not None else None
    # the fused step reads the results itself: both ways Keras reads them must be its own
    if fused is None or any(getattr(type(model), name, None) is not getattr(cls, name, None)
                            for name in ("compute_metrics", "get_metrics_result")):
        return None
    return fused(model)


def global_mode():
    return state.options.batch_mode == "global" and state.size > 1


def training_sliced():
    """fit's training steps cut each batch by rank: global-batch mode, and
    per-rank mode dealing by shares (Note [Batches by shares], per_rank.py)."""
    return global_mode() or per_rank_mode.by_shares()


def take_slice(data, per_rank=False):
    """This rank's slice of `data` and its Split: cut from the global batch,
    or as a sharded pipeline made it (input_sharding.py); the batch checked.
    `per_rank`: a per-rank mode training step, whose batch is the ranks'
    batches put together in fit but this rank's own in train_on_batch (Note
    [Batches by shares], per_rank.py): that one is kept whole, unchecked."""
    sharded = input_sharding.unwrap(data)
    if sharded is None:
        if per_rank:
            grouped = tf.greater(batching.batches_per_step_variable(), 1.0)
            batch_check.graph_check(data, when=grouped)
            return batching.slice_batch(data, whole=tf.logical_not(grouped))
        batch_check.graph_check(data)
        return batching.slice_batch(data)
    local, split, given = sharded
    batch_check.graph_check(local, given)
    return local, split


def sliced(step, local_losses=False, per_rank=False):
    """`step` run on this rank's slice of the batch, its split recorded for
    the optimizer and loss wrappers (batching.py). `local_losses`: Note
    [Local losses in Keras' own steps]; `per_rank`: a per-rank mode train_step
    (Note [Batches by shares], per_rank.py)."""
    @functools.wraps(step)
    def sliced_step(data):
        local, split = take_slice(data, per_rank)
        if split is None:
            return step(data)
        batching.record_split(split, per_rank)
        with batching.tracing_split(split), \
                flags.inside("local_loss") if local_losses else contextlib.nullcontext():
            return step(local)

    sliced_step._tfmpi_step = True
    return sliced_step


def per_rank(step):
    """`step` on this rank's own batch, weighted 1/N (per-rank batch mode)."""
    @functools.wraps(step)
    def per_rank_step(data):
        batching.record_unsplit(1.0 / state.size)
        return step(data)

    per_rank_step._tfmpi_step = True
    return per_rank_step


def sliced_predict(step):
    """`step` run on this rank's slice; the outputs gathered back in order."""
    @functools.wraps(step)
    def sliced_predict_step(data):
        local, split = take_slice(data)
        if split is None:
            return step(data)
        with batching.tracing_split(split):
            outputs = step(local)
        flat = tf.nest.flatten(outputs)
        prefix = naming.name("predict")

        def handed_in(t):
            # a batch every rank computed whole is rank 0's to hand in
            # (Note [Batches smaller than the ranks], batching.py)
            if state.rank == 0 or split.replicated is None:
                return t
            return t[:tf.where(split.replicated, 0, tf.shape(t)[0])]

        gathered = [tops.allgather(handed_in(t), name=f"{prefix}/{i}")
                    if isinstance(t, tf.Tensor) and t.shape.rank != 0 else t
                    for i, t in enumerate(flat)]
        return tf.nest.pack_sequence_as(outputs, gathered)

    sliced_predict_step._tfmpi_step = True
    return sliced_predict_step


def install_step(model, name):
    """Put the wrapped `name` (train_step, test_step, predict_step) on the
    model instance, once."""
    if state.size == 1:
        return
    current = getattr(model, name)
    if getattr(current, "_tfmpi_step", False):
        return
    if name == "predict_step":
        wrapped = sliced_predict(current)
    elif name == "test_step" or training_sliced():
        local = keeps_losses_local(model, name)
        if name == "train_step":
            current = _fused_train_step(model) or current
        wrapped = sliced(current, local, name == "train_step" and not global_mode())
    else:
        wrapped = per_rank(current)
    object.__setattr__(model, name, wrapped)


def _variables_so_far(model):
    """The model's variables; none yet for a model built by its first call (a
    Sequential without an input shape) that was not called: tf_keras raises
    there, Keras 3 lists none. Such a model creates its weights inside the
    first step, and the optimizer's first update broadcasts the trained ones
    (Note [Where gradients are reduced], optimizer_patches.py)."""
    try:
        return list(model.variables)
    except ValueError:
        if getattr(model, "built", True):
            raise
        return []


def sync_model_state(model):
    """Broadcast the model's variables (and its optimizer's, where built) from rank 0;
    not the slots of a sharded optimizer, which come from their owners (Note [Owned
    state], sharded_update.py: rank 0 holds some empty)."""
    variables = _variables_so_far(model)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and getattr(optimizer, "built", True):
        extra = getattr(optimizer, "variables", [])
        owned = sharded_update.slots_with_owners()
        variables += [v for v in (extra() if callable(extra) else extra) if id(v) not in owned]
    collectives.broadcast_variables(variables)


def _between_steps(function, model):
    """fit's train function, followed by what runs eagerly between steps: the
    moving statistics of per-slice BatchNormalization made to agree (Note
    [Moving statistics that agree], batchnorm.py), and the weights checked
    where due (Note [Weight agreement], weight_check.py)."""
    if function is None or getattr(function, "_tfmpi_between_steps", False):
        return function
    calls = [0]

    def train_function(*args, **kwargs):
        logs = function(*args, **kwargs)
        calls[0] += 1
        batchnorm.agree_moving_statistics()
        weight_check.after_step(model.trainable_variables, "fit", calls[0])
        return logs

    train_function._tfmpi_between_steps = True
    return train_function


def wrap_make_functions(cls, makers):
    """Wrap cls.<maker> (make_train_function, ...): the wrapped step is put on
    the instance before Keras makes its function; the model's state is
    broadcast when a train function is made. `makers` maps each maker to
    (step name, attribute holding the made function)."""
    for maker, (step_name, made_attr) in makers.items():
        original = getattr(cls, maker)

        def make(original, step_name, made_attr):
            @functools.wraps(original)
            def make_function(self, force=False):
                fresh = force or getattr(self, made_attr) is None
                if fresh:
                    install_step(self, step_name)
                result = original(self, force)
                if fresh and step_name == "train_step" and state.size > 1:
                    sync_model_state(self)
                    function = _between_steps(getattr(self, made_attr), self)
                    if training_sliced():  # Note [Live shares], shares.py
                        function = shares.wrap_train_function(function)
                    object.__setattr__(self, made_attr, function)
                    return function
                return result if result is not None else getattr(self, made_attr)

            return make_function

        setattr(cls, maker, make(original, step_name, made_attr))


def mark_loops(cls, names):
    """Wrap cls.<name> so the custom-loop slicing knows a Keras loop runs,
    every rank's batch share is reset afterwards, a batch mismatch found
    inside the compiled step is reported as such, and train_on_batch's batch
    counts as one rank's (Note [Batches by shares], per_rank.py)."""
    for name in names:
        original = getattr(cls, name)
        if getattr(original, "_tfmpi_wrapped", False):
            continue

        def make(original):
            @functools.wraps(original)
            def run(self, *args, **kwargs):
                if original.__name__ == "train_on_batch" and per_rank_mode.by_shares():
                    batching.set_batches_per_step(1)  # Note [Batches by shares]
                with loops.keras_loop(original.__name__):
                    batch_check.loop_started(original.__name__)
                    try:
                        return original(self, *args, **kwargs)
                    except tf.errors.InvalidArgumentError as e:
                        mismatch = batch_check.translate(e)
                        if mismatch is None:
                            raise
                        raise mismatch from None
                    finally:
                        batching.reset_weight()

            run._tfmpi_wrapped = True
            return run

        setattr(cls, name, make(original))


def xla_notice():
    if state.rank == 0:
        print("tfmpi: XLA compilation (jit_compile) is turned off for this model: tfmpi's "
              "collective ops run outside XLA.", file=sys.stderr)
