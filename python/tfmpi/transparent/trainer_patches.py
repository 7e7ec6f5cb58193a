"""Keras' fit / evaluate / predict under global-batch semantics.

The step functions Keras compiles are wrapped so that each rank runs the
(possibly user-overridden) step on its slice of the batch (batching.py) and
records its share of the batch for the optimizer wrapper; predict gathers the
slices back in order. Model and optimizer variables are broadcast from rank 0
when the train function is made, before the first update. XLA compilation is
turned off when there is more than one rank: tfmpi's ops have no XLA kernels.
"""

import functools

from tfmpi.transparent import state, steps


def _patch_make_functions(TensorFlowTrainer):
    def make_train_function(self, force=False):
        if self.train_function is not None and not force:
            return self.train_function
        step = steps.sliced(self.train_step) if steps.global_mode() else self.train_step
        self.train_function = self._make_function(step)
        if state.size > 1:
            steps.sync_model_state(self)
        return self.train_function

    def make_test_function(self, force=False):
        if self.test_function is not None and not force:
            return self.test_function
        step = steps.sliced(self.test_step) if steps.global_mode() else self.test_step
        self.test_function = self._make_function(step)
        return self.test_function

    original_make_predict = TensorFlowTrainer.make_predict_function

    def make_predict_function(self, force=False):
        if self.predict_function is not None and not force:
            return self.predict_function
        # Keras' predict function looks self.predict_step up when it traces, so
        # the sliced step is installed on the instance (once).
        if steps.global_mode() and "predict_step" not in self.__dict__:
            object.__setattr__(self, "predict_step", steps.sliced_predict(self.predict_step, self))
        return original_make_predict(self, force)

    TensorFlowTrainer.make_train_function = make_train_function
    TensorFlowTrainer.make_test_function = make_test_function
    TensorFlowTrainer.make_predict_function = make_predict_function


def _patch_jit(Trainer):
    original_auto = Trainer._resolve_auto_jit_compile
    Trainer._resolve_auto_jit_compile = lambda self: original_auto(self) if state.size == 1 else False
    original_compile = Trainer.compile

    @functools.wraps(original_compile)
    def compile(self, *args, **kwargs):
        result = original_compile(self, *args, **kwargs)
        if self.jit_compile and state.size > 1:  # alone, no collective runs: XLA is fine
            steps.xla_notice()
            self.jit_compile = False
        return result

    Trainer.compile = compile


def install():
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
    from keras.src.trainers.trainer import Trainer

    _patch_make_functions(TensorFlowTrainer)
    steps.mark_loops(TensorFlowTrainer, ("fit", "evaluate", "predict", "train_on_batch",
                                         "test_on_batch", "predict_on_batch"))
    _patch_jit(Trainer)
