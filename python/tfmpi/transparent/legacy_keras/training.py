"""tf_keras' fit / evaluate / predict under global-batch (or per-rank) semantics.

tf_keras' step functions call model.train_step / test_step / predict_step when
they trace, so the wrapped steps (../steps.py) are installed on the model
instance when a step function is made. The model's state is broadcast from
rank 0 when the train function is made; XLA is turned off with more than one
rank; Keras' own loops are marked so custom-loop slicing stays out of them,
and each epoch restarts the batch-agreement checks (../batch_check.py).
"""

import functools

from tfmpi.transparent import batch_check, loops, per_rank, state, steps
from tfmpi.transparent.legacy_keras import train_step

MAKERS = {"make_train_function": ("train_step", "train_function"),
          "make_test_function": ("test_step", "test_function"),
          "make_predict_function": ("predict_step", "predict_function")}


def _patch_jit(Model):
    original_compile = Model.compile

    @functools.wraps(original_compile)
    def compile(self, *args, **kwargs):
        result = original_compile(self, *args, **kwargs)
        if getattr(self, "_jit_compile", None) and state.size > 1:
            steps.xla_notice()
            self._jit_compile = False
        return result

    Model.compile = compile


def _patch_epochs(Handler):
    original = Handler.enumerate_epochs

    @functools.wraps(original)
    def enumerate_epochs(self):
        for epoch, iterator in original(self):
            batch_check.pass_started()
            yield epoch, iterator

    Handler.enumerate_epochs = enumerate_epochs


def _patch_per_rank(Handler):
    """Per-rank batch mode: fit's training batches dealt round-robin (see ../per_rank.py)."""
    original = Handler._configure_dataset_and_inferred_steps

    @functools.wraps(original)
    def configure(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not loops.claim_training_iterator():
            return
        if self._steps_per_epoch not in (None, -1):  # each rank draws its own steps
            self._dataset = per_rank.deal(self._dataset, None)[0]
            return
        if self._inferred_steps is None:
            raise ValueError(per_rank.UNKNOWN_EPOCH)
        self._dataset, steps_per_rank = per_rank.deal(self._dataset, self._inferred_steps)
        self._inferred_steps = steps_per_rank
        self._steps_per_epoch = steps_per_rank  # what tf_keras re-infers each epoch

    Handler._configure_dataset_and_inferred_steps = configure


def install():
    from tf_keras.src.engine import data_adapter, training

    Model = training.Model
    steps.register_own_steps(Model, train_step.fused_train_step)
    steps.wrap_make_functions(Model, MAKERS)
    steps.mark_loops(Model, ("fit", "evaluate", "predict", "train_on_batch", "test_on_batch",
                             "predict_on_batch"))
    _patch_jit(Model)
    _patch_epochs(data_adapter.DataHandler)
    if state.options.batch_mode == "per-rank" and state.size > 1:
        _patch_per_rank(data_adapter.DataHandler)
