"""The TensorFlow, Keras and tf_keras releases transparent mode is tested
with, and the parts of them (private ones included) that its patches rely on.

Note [Tested versions]
Transparent mode patches Keras and TensorFlow at a few points, some of them
private (keras.src...). Those move between releases, so transparent mode only
starts with releases inside TESTED (CI runs the fidelity tier with the oldest
and the newest Keras 3 minor of the range); outside it, it stops with a
message naming the versions, unless TFMPI_ALLOW_UNTESTED_VERSIONS=1. Whatever
the version, every module, class and attribute in REQUIRED must exist before
the first patch is made: a missing one stops the script at start-up, naming
it, instead of failing in the middle of training. Attributes that only exist
on instances are checked with require_instance where the instance first
reaches transparent mode, before it takes part in a step.
pyproject.toml's extras `tensorflow` and `legacy` state the same ranges
(tests/python/test_versions.py keeps them in step).
"""

import importlib

from tfmpi.errors import UnsupportedVersionError
from tfmpi.transparent import state

# package: (oldest tested, newest tested) as (major, minor)
TESTED = {"tensorflow": ((2, 21), (2, 21)), "keras": ((3, 8), (3, 15)),
          "tf_keras": ((2, 21), (2, 21))}

_DISTRIBUTIONS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
                  "keras": ("keras",), "tf_keras": ("tf-keras", "tf_keras")}

REQUIRED = {
    "tensorflow": {
        "tensorflow.python.data.ops.dataset_ops": ["DatasetV2.__iter__", "DatasetV2._inputs"],
        "tensorflow.python.data.ops.structured_function": ["StructuredFunctionWrapper.__init__"],
        "tensorflow.python.data.ops.cache_op": ["CacheDataset.__init__"],
        "tensorflow.python.distribute.distribute_lib": ["StrategyBase.__init__"],
        "tensorflow": ["random.stateless_uniform", "random.Generator.uniform",
                       "nn.experimental.stateless_dropout", "nn.experimental.general_dropout",
                       "nn.compute_average_loss", "train.Checkpoint.write",
                       "train.Checkpoint.restore", "train.CheckpointManager.restore_or_initialize",
                       "image.stateless_random_flip_left_right"],
        "tensorflow.python.saved_model.save": ["save"],
        "tensorflow.python.saved_model.load": ["load"],
        "tensorflow.python.ops.summary_ops_v2": ["create_file_writer_v2", "create_noop_writer"],
    },
    "keras": {
        "keras.src.backend.tensorflow.trainer": [
            "TensorFlowTrainer.make_train_function", "TensorFlowTrainer.make_test_function",
            "TensorFlowTrainer.make_predict_function", "TensorFlowTrainer.train_step",
            "TFEpochIterator.__init__", "TFEpochIterator.reset",
            "TensorFlowTrainer.test_step"],
        "keras.src.trainers.trainer": ["Trainer._resolve_auto_jit_compile", "Trainer.compile",
                                       "Trainer.get_metrics_result", "Trainer.compute_metrics",
                                       "Trainer._compute_loss", "Trainer.compute_loss"],
        "keras.src.trainers.data_adapters.data_adapter_utils": ["unpack_x_y_sample_weight"],
        "keras.src.metrics.reduction_metrics": ["Mean.update_state"],
        "keras.src.trainers.epoch_iterator": ["EpochIterator.__iter__"],
        "keras.src.optimizers.base_optimizer": ["BaseOptimizer.apply",
                                                "BaseOptimizer.iterations"],
        "keras.src.optimizers.loss_scale_optimizer": ["LossScaleOptimizer.apply"],
        "keras.src.optimizers.adam": ["Adam.update_step"],
        "keras.src.optimizers.sgd": ["SGD.update_step"],
        "keras.src.metrics.metric": ["Metric.stateless_result", "Metric.result"],
        "keras.src.losses.loss": ["Loss.__call__", "apply_mask", "reduce_values",
                                  "unscale_loss_for_distribution"],
        "keras.src.trainers.compile_utils": ["CompileLoss.call"],
        "keras.src.callbacks.backup_and_restore": [
            "BackupAndRestore._save_model", "BackupAndRestore.on_train_begin",
            "BackupAndRestore.on_train_end"],
        "keras.src.callbacks.callback_list": ["CallbackList.__init__"],
        "keras.src.callbacks.model_checkpoint": ["ModelCheckpoint._save_model"],
        "keras.src.models.model": ["Model.save", "Model.save_weights", "Model.export",
                                   "Model.load_weights"],
        "keras.src.saving.saving_api": ["save_model", "save_weights", "load_model",
                                        "load_weights"],
        "keras.src.layers.normalization.batch_normalization": ["BatchNormalization._moments"],
        "keras.src.backend.tensorflow.random": ["shuffle"],
        "keras.src.backend.tensorflow.core": ["Variable._initialize_with_initializer"],
        "keras.src.utils.python_utils": ["pythonify_logs"],
    },
    "tf_keras": {
        "tf_keras.src.engine.training": [
            "Model.make_train_function", "Model.make_test_function",
            "Model.make_predict_function", "Model.get_metrics_result", "Model.save",
            "Model.load_weights"],
        "tf_keras.src.engine.data_adapter": ["DataHandler.enumerate_epochs",
                                             "DataHandler._configure_dataset_and_inferred_steps"],
        "tf_keras.src.engine.base_layer": ["Layer.add_weight"],
        "tf_keras.src.optimizers.optimizer": ["_BaseOptimizer.apply_gradients"],
        "tf_keras.src.optimizers.legacy.optimizer_v2": ["OptimizerV2.apply_gradients"],
        "tf_keras.src.mixed_precision.loss_scale_optimizer": ["BaseLossScaleOptimizer"],
        "tf_keras.src.metrics.base_metric": ["Metric.result"],
        "tf_keras.src.losses": ["Loss.__call__"],
        "tf_keras.src.utils.losses_utils": ["apply_valid_mask", "ReductionV2.AUTO"],
        "tf_keras.src.callbacks": ["ModelCheckpoint._save_model", "CallbackList.__init__"],
        "tf_keras.src.distribute.worker_training_state": [
            "WorkerTrainingState.back_up", "WorkerTrainingState.delete_backup"],
        "tf_keras.src.saving.saving_api": ["save_model", "load_model"],
        "tf_keras.src.layers.normalization.batch_normalization": [
            "BatchNormalizationBase._calculate_mean_and_var"],
    },
}

OVERRIDE = "TFMPI_ALLOW_UNTESTED_VERSIONS=1"


def _range_text(package):
    (a, b), (c, d) = TESTED[package]
    return f"{a}.{b}" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}"


def installed_version(package):
    import sys
    from importlib.metadata import PackageNotFoundError, version

    module = sys.modules.get(package)
    if getattr(module, "__version__", None):
        return module.__version__
    for distribution in _DISTRIBUTIONS[package]:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    module = importlib.import_module(package)
    return getattr(module, "__version__", "unknown")


def check_version(package, version=None):
    """Raise UnsupportedVersionError if `package` is outside TESTED (and not overridden)."""
    version = version or installed_version(package)
    try:
        minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        minor = None
    low, high = TESTED[package]
    if minor is not None and low <= minor <= high:
        return
    if state.options is not None and state.options.allow_untested_versions:
        return
    raise UnsupportedVersionError(
        f"transparent mode is tested with {package} {_range_text(package)}, and this is "
        f"{package} {version}. Install a tested release (pip install tfmpi's extras "
        f"'tensorflow' / 'legacy' name them), or set {OVERRIDE} to run anyway at your own "
        "risk (the patched Keras/TensorFlow internals may differ).")


def _resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def missing(package):
    """['module: Class.attr', ...] of REQUIRED[package] that this installation lacks."""
    out = []
    for module_name, attributes in REQUIRED[package].items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            out.append(f"{module_name} (module)")
            continue
        for dotted in attributes:
            try:
                _resolve(module, dotted)
            except AttributeError:
                out.append(f"{module_name}: {dotted}")
    return out


def check(package):
    """Version gate, then the parts transparent mode patches; raises with the reason."""
    check_version(package)
    lacking = missing(package)
    if lacking:
        raise UnsupportedVersionError(
            f"{package} {installed_version(package)} lacks what transparent mode patches: "
            f"{', '.join(lacking)}. Use a tested release ({package} {_range_text(package)}).")


def require_instance(obj, attributes, what):
    """Stop with a clear error if `obj` lacks an attribute transparent mode uses."""
    lacking = [a for a in attributes if not hasattr(obj, a)]
    if lacking:
        raise UnsupportedVersionError(
            f"tfmpi: {what} has no {', '.join(lacking)}, which transparent mode relies on; "
            f"this Keras/TensorFlow differs from the tested releases (see docs/transparent.md, "
            "Versions).")
