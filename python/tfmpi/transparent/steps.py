"""Pieces shared by the Keras 3 and tf_keras trainer patches: the sliced step
functions (global-batch semantics inside the compiled step), the wrapper that
marks Keras' own loops, and the broadcast of a model's state."""

import functools
import sys

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, collectives, loops, state


def global_mode():
    return state.options.batch_mode == "global" and state.size > 1


def sliced(step):
    """`step` run on this rank's slice of the batch, its share recorded for
    the optimizer wrapper (batching.py)."""
    @functools.wraps(step)
    def sliced_step(data):
        local, weight = batching.slice_batch(data)
        if weight is not None:
            batching.record_share(weight)
        return step(local)

    return sliced_step


def sliced_predict(step, model):
    """`step` run on this rank's slice; the outputs gathered back in order."""
    prefix = f"tfmpi/predict/{collectives.object_id(model, 'model')}"

    @functools.wraps(step)
    def sliced_predict_step(data):
        local, weight = batching.slice_batch(data)
        outputs = step(local)
        if weight is None:
            return outputs
        flat = tf.nest.flatten(outputs)
        gathered = [tops.allgather(t, name=f"{prefix}/{i}") if isinstance(t, tf.Tensor)
                    and t.shape.rank != 0 else t for i, t in enumerate(flat)]
        return tf.nest.pack_sequence_as(outputs, gathered)

    return sliced_predict_step


def sync_model_state(model):
    """Broadcast the model's variables (and its optimizer's, where built) from rank 0."""
    variables = list(model.variables)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and getattr(optimizer, "built", True):
        extra = getattr(optimizer, "variables", [])
        variables += list(extra() if callable(extra) else extra)
    collectives.broadcast_variables(variables, f"model{collectives.object_id(model, 'model')}")


def mark_loops(cls, names):
    """Wrap cls.<name> so the custom-loop slicing knows a Keras loop runs, and
    every rank's batch share is reset afterwards."""
    for name in names:
        original = getattr(cls, name)
        if getattr(original, "_tfmpi_wrapped", False):
            continue

        def make(original):
            @functools.wraps(original)
            def run(self, *args, **kwargs):
                with loops.keras_loop(original.__name__):
                    try:
                        return original(self, *args, **kwargs)
                    finally:
                        batching.reset_weight()

            run._tfmpi_wrapped = True
            return run

        setattr(cls, name, make(original))


def xla_notice():
    if state.rank == 0:
        print("tfmpi: XLA compilation (jit_compile) is turned off for this model: tfmpi's "
              "collective ops run outside XLA.", file=sys.stderr)
