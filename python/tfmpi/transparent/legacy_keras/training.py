"""tf_keras' fit / evaluate / predict under global-batch (or per-rank) semantics.

tf_keras' step functions call model.train_step / test_step / predict_step when
they trace, so the wrapped steps (../steps.py) are installed on the model
instance when a step function is made. The model's state is broadcast from
rank 0 when the train function is made; XLA is turned off with more than one
rank; Keras' own loops are marked so custom-loop slicing stays out of them,
and each epoch restarts the batch-agreement checks (../batch_check.py). A
tf.data pipeline given to fit / evaluate / predict is sharded by elements as
with Keras 3 (Note [Sharded input], ../input_sharding.py; in per-rank batch
mode a rank decodes only the training batches it is dealt); fit's and
evaluate's by files under --data-sharding files (Note [File sharding],
../file_sharding.py; predict keeps element-level sharding).
"""

import functools

from tfmpi.transparent import (batch_check, file_sharding, input_sharding, loops, per_rank,
                               state, steps)
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
            if getattr(self, "_tfmpi_until_exhausted", False):
                self._inferred_steps = None  # see _patch_sharded_input
            yield epoch, iterator

    Handler.enumerate_epochs = enumerate_epochs


def _plan_of_script_pipeline(handler):
    """input_sharding's Plan for the tf.data pipeline a script gave fit /
    evaluate / predict, or None: data of other kinds (arrays, generators) has
    no per-element work to share, and a preprocessing layer's adapt (run inside
    fit by a callback, say) gives no model and reads its data whole."""
    if (not loops.inside_keras_loop() or getattr(handler, "_model", None) is None
            or type(handler._adapter).__name__ != "DatasetAdapter"):
        return None
    return input_sharding.plan_for(handler._dataset)


def _patch_sharded_input(Handler):
    """A tf.data pipeline given to fit / evaluate / predict: the handler's
    dataset becomes an input_sharding.Pass, so each epoch's iterator is of
    the pipeline rewritten with the work shares in force then (Note [Sharded
    input]; by files under --data-sharding files), as Keras 3's epoch
    iterators do. tf_keras infers the steps of an epoch from the script's
    dataset before this, and keeps them (a Pass is not a tf.data.Dataset,
    which it re-infers from): right for element-level sharding, which keeps
    the script's batches. Where file_sharding.runs_until_exhausted says so,
    the handler infers none instead, at every epoch (_patch_epochs)."""
    original = Handler._configure_dataset_and_inferred_steps

    @functools.wraps(original)
    def configure(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if getattr(self, "_tfmpi_dealt", False):  # per-rank mode's training data
            return
        plan = _plan_of_script_pipeline(self)
        if plan is not None:
            self._dataset = input_sharding.Pass(plan)
            if file_sharding.runs_until_exhausted(plan, self._steps_per_epoch):
                self._tfmpi_until_exhausted = True
                self._inferred_steps = None

    Handler._configure_dataset_and_inferred_steps = configure


def _patch_per_rank(Handler):
    """Per-rank batch mode: fit's training batches dealt round-robin, or N at
    a time cut by the work shares (see ../per_rank.py); of a tf.data pipeline
    input_sharding can rewrite, a rank decodes only the batches it is dealt,
    or the rows of its slice (Note [Sharded input])."""
    original = Handler._configure_dataset_and_inferred_steps

    @functools.wraps(original)
    def configure(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not loops.claim_training_iterator():
            return
        self._tfmpi_dealt = True
        plan = _plan_of_script_pipeline(self)

        # Arrays are one dataset holding every epoch, one after another.
        epochs = 1 if self._adapter.should_recreate_iterator() else self._epochs - self._initial_epoch

        def deal(batches):
            return per_rank.fit_batches(self._dataset, plan, batches, epochs)

        if self._steps_per_epoch not in (None, -1):  # each rank draws its own steps
            self._dataset = deal(None)[0]
            return
        if self._inferred_steps is None:
            raise ValueError(per_rank.UNKNOWN_EPOCH)
        self._dataset, steps_per_rank = deal(self._inferred_steps)
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
        _patch_per_rank(data_adapter.DataHandler)  # inside the next: it marks what it deals
    if input_sharding.enabled() or file_sharding.enabled():
        _patch_sharded_input(data_adapter.DataHandler)
