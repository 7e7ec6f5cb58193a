"""Keras' fit / evaluate / predict under global-batch semantics.

Keras makes its step functions from the model's train_step / test_step /
predict_step (the script's overrides included). Those are wrapped on the
model instance before Keras makes the functions (steps.py): each rank runs
the step on its slice of the batch (or, in per-rank mode, trains on its own
batches, or its share of the ranks' batches put together), predict gathers the slices back in order. Model and optimizer
variables are broadcast from rank 0 when the train function is made, before
the first update. XLA compilation is turned off when there is more than one
rank: tfmpi's ops have no XLA kernels. A new pass over the data (an epoch)
restarts the batch-agreement checks (batch_check.py).
"""

import functools

from tfmpi.transparent import batch_check, keras_step, state, steps

MAKERS = {"make_train_function": ("train_step", "train_function"),
          "make_test_function": ("test_step", "test_function"),
          "make_predict_function": ("predict_step", "predict_function")}


def _patch_jit(Trainer):
    original_auto = Trainer._resolve_auto_jit_compile

    @functools.wraps(original_auto)
    def _resolve_auto_jit_compile(self):
        return original_auto(self) if state.size == 1 else False

    Trainer._resolve_auto_jit_compile = _resolve_auto_jit_compile
    original_compile = Trainer.compile

    @functools.wraps(original_compile)
    def compile(self, *args, **kwargs):
        result = original_compile(self, *args, **kwargs)
        if self.jit_compile and state.size > 1:  # alone, no collective runs: XLA is fine
            steps.xla_notice()
            self.jit_compile = False
        return result

    Trainer.compile = compile


def _patch_epochs(EpochIterator):
    original_iter = EpochIterator.__iter__

    @functools.wraps(original_iter)
    def __iter__(self):
        batch_check.pass_started()
        return original_iter(self)

    EpochIterator.__iter__ = __iter__


def install():
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
    from keras.src.trainers.epoch_iterator import EpochIterator
    from keras.src.trainers.trainer import Trainer

    steps.register_own_steps(TensorFlowTrainer, keras_step.fused_train_step)
    steps.wrap_make_functions(TensorFlowTrainer, MAKERS)
    steps.mark_loops(TensorFlowTrainer, ("fit", "evaluate", "predict", "train_on_batch",
                                         "test_on_batch", "predict_on_batch"))
    _patch_jit(Trainer)
    _patch_epochs(EpochIterator)
