"""tf_keras' fit / evaluate / predict under global-batch (or per-rank) semantics.

tf_keras' step functions call model.train_step / test_step / predict_step when
they trace, so the sliced steps (../steps.py) are installed on the model
instance when a step function is made. The model's state is broadcast from
rank 0 when the train function is made; XLA is turned off with more than one
rank; Keras' own loops are marked so custom-loop slicing stays out of them.
"""

import functools

from tfmpi.transparent import loops, per_rank, state, steps


def _install_sliced_step(model, name):
    if not steps.global_mode() or name in model.__dict__:
        return
    step = getattr(model, name)
    wrapped = (steps.sliced_predict(step, model) if name == "predict_step"
               else steps.sliced(step))
    object.__setattr__(model, name, wrapped)


def _patch_make_functions(Model):
    for maker, step_name in (("make_train_function", "train_step"),
                             ("make_test_function", "test_step"),
                             ("make_predict_function", "predict_step")):
        original = getattr(Model, maker)

        def make(original, step_name):
            @functools.wraps(original)
            def make_function(self, force=False):
                cached = {"train_step": self.train_function, "test_step": self.test_function,
                          "predict_step": self.predict_function}[step_name]
                if cached is not None and not force:
                    return cached
                _install_sliced_step(self, step_name)
                function = original(self, force)
                if step_name == "train_step" and state.size > 1:
                    steps.sync_model_state(self)
                return function

            return make_function

        setattr(Model, maker, make(original, step_name))


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


def _patch_per_rank(data_adapter):
    """Per-rank batch mode: fit's training batches dealt round-robin (see ../per_rank.py)."""
    Handler = data_adapter.DataHandler
    original = Handler._configure_dataset_and_inferred_steps

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
    _patch_make_functions(Model)
    steps.mark_loops(Model, ("fit", "evaluate", "predict", "train_on_batch", "test_on_batch",
                             "predict_on_batch"))
    _patch_jit(Model)
    if state.options.batch_mode == "per-rank" and state.size > 1:
        _patch_per_rank(data_adapter)
