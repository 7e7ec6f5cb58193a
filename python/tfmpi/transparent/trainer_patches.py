"""Keras' fit / evaluate / predict under global-batch semantics.

The step functions Keras compiles are wrapped so that each rank runs the
(possibly user-overridden) step on its slice of the batch (batching.py) and
records its share of the batch for the optimizer wrapper; predict gathers the
slices back in order. Model and optimizer variables are broadcast from rank 0
when the train function is made, before the first update. XLA compilation is
turned off when there is more than one rank: tfmpi's ops have no XLA kernels.
"""

import functools
import sys

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, collectives, loops, state


def _global_mode():
    return state.options.batch_mode == "global" and state.size > 1


def _wrap_step(step):
    @functools.wraps(step)
    def sliced_step(data):
        local, weight = batching.slice_batch(data)
        if weight is not None:
            batching.weight_variable().assign(weight)
        return step(local)

    return sliced_step


def _wrap_predict_step(step, model):
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


def _sync_state(model):
    variables = list(model.variables)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and getattr(optimizer, "built", False):
        variables += list(optimizer.variables)
    collectives.broadcast_variables(variables, f"model{collectives.object_id(model, 'model')}")


def _patch_make_functions(TensorFlowTrainer):
    def make_train_function(self, force=False):
        if self.train_function is not None and not force:
            return self.train_function
        step = _wrap_step(self.train_step) if _global_mode() else self.train_step
        self.train_function = self._make_function(step)
        if state.size > 1:
            _sync_state(self)
        return self.train_function

    def make_test_function(self, force=False):
        if self.test_function is not None and not force:
            return self.test_function
        step = _wrap_step(self.test_step) if _global_mode() else self.test_step
        self.test_function = self._make_function(step)
        return self.test_function

    original_make_predict = TensorFlowTrainer.make_predict_function

    def make_predict_function(self, force=False):
        if self.predict_function is not None and not force:
            return self.predict_function
        # Keras' predict function looks self.predict_step up when it traces, so
        # the sliced step is installed on the instance (once).
        if _global_mode() and "predict_step" not in self.__dict__:
            object.__setattr__(self, "predict_step", _wrap_predict_step(self.predict_step, self))
        return original_make_predict(self, force)

    TensorFlowTrainer.make_train_function = make_train_function
    TensorFlowTrainer.make_test_function = make_test_function
    TensorFlowTrainer.make_predict_function = make_predict_function


def _patch_loops(TensorFlowTrainer):
    for name in ("fit", "evaluate", "predict", "train_on_batch", "test_on_batch",
                 "predict_on_batch"):
        original = getattr(TensorFlowTrainer, name)

        def make(original):
            @functools.wraps(original)
            def run(self, *args, **kwargs):
                with loops.keras_loop(original.__name__):
                    try:
                        return original(self, *args, **kwargs)
                    finally:
                        batching.reset_weight()

            return run

        setattr(TensorFlowTrainer, name, make(original))


def _patch_jit(Trainer):
    original_auto = Trainer._resolve_auto_jit_compile
    Trainer._resolve_auto_jit_compile = lambda self: original_auto(self) if state.size == 1 else False
    original_compile = Trainer.compile

    @functools.wraps(original_compile)
    def compile(self, *args, **kwargs):
        result = original_compile(self, *args, **kwargs)
        if self.jit_compile and state.size > 1:  # alone, no collective runs: XLA is fine
            if state.rank == 0:
                print("tfmpi: XLA compilation (jit_compile) is turned off for this model: tfmpi's "
                      "collective ops run outside XLA.", file=sys.stderr)
            self.jit_compile = False
        return result

    Trainer.compile = compile


def install():
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
    from keras.src.trainers.trainer import Trainer

    _patch_make_functions(TensorFlowTrainer)
    _patch_loops(TensorFlowTrainer)
    _patch_jit(Trainer)
