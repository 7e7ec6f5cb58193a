"""Every change transparent mode makes to TensorFlow, Keras 3 and tf_keras,
declared in one place.

Note [Patch registry]
A patch is one record: its target (module and attribute), which package line
it belongs to, the transparent-mode module that installs it, what it is for,
the note that explains it, how far it reaches beyond its target and when it
is installed. The version gate resolves every target of a line before the
first patch of that line is made (versions.check): a target that a release
lacks stops start-up, naming it with the installed and the tested versions,
instead of a patch quietly not applied. The gate's list is this registry
(plus versions.READS, the parts read but not patched). A test installs the
patches on both Keras lines, under every option that adds patches, finds
every attribute of TensorFlow and Keras whose value is transparent mode's
code, and fails on one that no record covers
(tests/python/test_patch_registry.py), so a patch cannot be added without
its record. `python -m tfmpi.patches` prints the inventory and
docs/patches.md is written from it.
The installers themselves still make the changes (each in its module, named
by `by`); applying the records from here, in an order they declare, with the
originals kept so that the patches can be removed again, is not done yet.

Reach:
  ""            the target only;
  "subclasses"  every subclass that defines the attribute, also those a script
                defines later (through __init_subclass__);
  "re-exports"  every public name of the package that holds the same object
                (tf.random.uniform is also tf.compat.v2.random.uniform, ...);
  "classes"     every class of the public namespaces (keras.layers, ...) that
                defines it, or one of whose bases does.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Patch:
    line: str  # "tensorflow", "keras" or "tf_keras"
    target: str  # "module:attribute.path"
    by: str  # the module of tfmpi.transparent that installs it
    purpose: str
    note: str = ""
    reach: str = ""
    when: str = ""  # "": whenever the line is patched with more than one rank
    # where the target is a class attribute, the class must define it itself
    # (a release that drops an override would otherwise get the base's wrapped
    # and set on the class), unless it is inherited by design; "added": the
    # patch adds the attribute, only its owner must exist
    holds: str = "own"  # "own", "inherited" or "added"

    @property
    def module(self):
        return self.target.split(":")[0]

    @property
    def path(self):
        return self.target.split(":")[1]


def _records(line, by, note, purpose, targets, reach="", when="", holds="own"):
    return [Patch(line, t, by, purpose, note, reach, when, holds) for t in targets]


_TF = "tensorflow"
_K = "keras"
_TK = "tf_keras"
_VERIFY = "tfmpirun --verify"
_GLOBAL = "global batch mode (TFMPI_BATCH_MODE=global)"
_RANDOM_ROWS = "Random draws under a split batch"

PATCHES = [
    # ---- TensorFlow
    *_records(_TF, "tf_patches", "", "refuse tf.distribute strategies (tfmpi is the strategy)",
              ["tensorflow.python.distribute.distribute_lib:StrategyBase.__init__"]),
    *_records(_TF, "custom_loops", "Split context",
              "slice each batch of a custom loop's dataset to the rank's rows",
              ["tensorflow.python.data.ops.dataset_ops:DatasetV2.__iter__"]),
    *_records(_TF, "losses", "Loss normalisers",
              "the global batch size in tf.nn.compute_average_loss",
              ["tensorflow:nn.compute_average_loss"]),
    *_records(_TF, "side_effects", "Rank-0 sections", "checkpoints written by rank 0",
              ["tensorflow.python.checkpoint.checkpoint:Checkpoint.write",
               "tensorflow.python.checkpoint.checkpoint:Checkpoint.save",
               "tensorflow.python.checkpoint.checkpoint_management:CheckpointManager.save"]),
    *_records(_TF, "side_effects", "Reading rank 0's files", "checkpoints read from rank 0's copy",
              ["tensorflow.python.checkpoint.checkpoint:Checkpoint.read",
               "tensorflow.python.checkpoint.checkpoint:Checkpoint.restore",
               "tensorflow.python.checkpoint.checkpoint_management:"
               "CheckpointManager.restore_or_initialize"]),
    *_records(_TF, "side_effects", "Reading rank 0's files",
              "SavedModels written by rank 0 and read from rank 0's copy",
              ["tensorflow.python.saved_model.save:save",
               "tensorflow.python.saved_model.load:load"], reach="re-exports"),
    *_records(_TF, "side_effects", "Rank-0 sections",
              "summary writers write on rank 0 only (the others get a no-op writer)",
              ["tensorflow.python.ops.summary_ops_v2:create_file_writer_v2"],
              reach="re-exports", when="ranks other than 0"),
    *_records(_TF, "randomness", _RANDOM_ROWS,
              "draws inside a split step are the 1-process draws cut to the rank's rows",
              ["tensorflow:random.uniform", "tensorflow:random.normal",
               "tensorflow:random.truncated_normal", "tensorflow:random.gamma",
               "tensorflow:random.poisson", "tensorflow:random.categorical",
               "tensorflow:random.stateless_uniform", "tensorflow:random.stateless_normal",
               "tensorflow:random.stateless_truncated_normal",
               "tensorflow:random.stateless_categorical", "tensorflow:random.stateless_binomial",
               "tensorflow:random.stateless_gamma", "tensorflow:random.stateless_poisson",
               "tensorflow:nn.dropout", "tensorflow:nn.experimental.stateless_dropout",
               "tensorflow:nn.experimental.general_dropout",
               "tensorflow:image.random_flip_left_right", "tensorflow:image.random_flip_up_down",
               "tensorflow:image.stateless_random_flip_left_right",
               "tensorflow:image.stateless_random_flip_up_down"],
              reach="re-exports", when=_GLOBAL),
    *_records(_TF, "randomness", _RANDOM_ROWS,
              "shuffles of the batch's rows are the 1-process shuffle of the gathered rows",
              ["tensorflow:random.shuffle", "tensorflow:random.experimental.stateless_shuffle"],
              reach="re-exports", when=_GLOBAL),
    *_records(_TF, "randomness", _RANDOM_ROWS,
              "tf.random.Generator draws inside a split step cut to the rank's rows; seeds "
              "and splits drawn whole",
              ["tensorflow.python.ops.stateful_random_ops:Generator.uniform",
               "tensorflow.python.ops.stateful_random_ops:Generator.normal",
               "tensorflow.python.ops.stateful_random_ops:Generator.truncated_normal",
               "tensorflow.python.ops.stateful_random_ops:Generator.uniform_full_int",
               "tensorflow.python.ops.stateful_random_ops:Generator.binomial",
               "tensorflow.python.ops.stateful_random_ops:Generator.make_seeds",
               "tensorflow.python.ops.stateful_random_ops:Generator.split"], when=_GLOBAL),
    *_records(_TF, "randomness", _RANDOM_ROWS,
              "draws in tf.data functions are not batch draws",
              ["tensorflow.python.data.ops.structured_function:StructuredFunctionWrapper.__init__"],
              when=_GLOBAL),
    *_records(_TF, "gradient_tape", "Gradients reduced at the tape",
              "gradients of a split custom step reduced where the tape computes them",
              ["tensorflow.python.eager.backprop:GradientTape.gradient"]),
    *_records(_TF, "gradient_tape", "Means of the batch",
              "the mean of a split batch's loss is the global batch's mean",
              ["tensorflow:math.reduce_mean"], reach="re-exports"),
    *_records(_TF, "dataset_cache", "", "tf.data file caches, one per rank",
              ["tensorflow.python.data.ops.cache_op:CacheDataset.__init__"]),
    *_records(_TF, "verify", "Proof runs",
              "record each step of a custom loop and its tapes for the comparison",
              ["tensorflow.python.data.ops.dataset_ops:DatasetV2.__iter__",
               "tensorflow.python.eager.backprop:GradientTape.gradient"], when=_VERIFY),
    # ---- Keras 3
    *_records(_K, "trainer_patches", "Global batch",
              "fit, evaluate and predict under global-batch semantics; the steps each rank "
              "runs; the model's state broadcast when a train function is made",
              ["keras.src.backend.tensorflow.trainer:TensorFlowTrainer.make_train_function",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.make_test_function",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.make_predict_function",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.fit",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.evaluate",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.predict",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.train_on_batch",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.test_on_batch",
               "keras.src.backend.tensorflow.trainer:TensorFlowTrainer.predict_on_batch"]),
    *_records(_K, "trainer_patches", "Batch agreement",
              "a new pass over the data restarts the batch-agreement checks",
              ["keras.src.trainers.epoch_iterator:EpochIterator.__iter__"]),
    *_records(_K, "trainer_patches", "", "XLA compilation off with more than one rank "
              "(tfmpi's ops have no XLA kernels)",
              ["keras.src.trainers.trainer:Trainer.compile",
               "keras.src.trainers.trainer:Trainer._resolve_auto_jit_compile"]),
    *_records(_K, "input_sharding", "Sharded input",
              "each rank reads and decodes only its slices' samples",
              ["keras.src.backend.tensorflow.trainer:TFEpochIterator.__init__"]),
    *_records(_K, "input_sharding", "Sharded input",
              "each rank reads and decodes only its slices' samples",
              ["keras.src.backend.tensorflow.trainer:TFEpochIterator.__iter__"],
              holds="inherited"),
    *_records(_K, "per_rank", "Batches by shares", "per-rank batches dealt by speed",
              ["keras.src.backend.tensorflow.trainer:TFEpochIterator.reset"],
              when="TFMPI_BATCH_MODE=per-rank", holds="inherited"),
    *_records(_K, "optimizer_patches", "Where gradients are reduced",
              "the global gradient before the update; variables broadcast before the first",
              ["keras.src.optimizers.base_optimizer:BaseOptimizer.apply",
               "keras.src.optimizers.loss_scale_optimizer:LossScaleOptimizer.apply"]),
    *_records(_K, "sharded_update", "Sharded update", "record the optimizer's slots per owner",
              ["keras.src.optimizers.base_optimizer:BaseOptimizer.add_variable_from_reference"],
              when="TFMPI_SHARDED_UPDATE=1"),
    *_records(_K, "fused_updates", "", "Adam's and SGD-momentum's update in one pass",
              ["keras.src.optimizers.adam:Adam.update_step",
               "keras.src.optimizers.sgd:SGD.update_step"], when="TFMPI_FUSED_UPDATES=1"),
    *_records(_K, "metrics_patches", "Global metrics",
              "metric results from the states summed over ranks; a batch every rank holds "
              "whole counted once",
              ["keras.src.metrics.metric:Metric.result",
               "keras.src.metrics.metric:Metric.update_state"], reach="subclasses"),
    *_records(_K, "metrics_patches", "Global metrics",
              "wraps the metric classes a script defines later",
              ["keras.src.metrics.metric:Metric.__init_subclass__"], holds="added"),
    *_records(_K, "metrics_patches", "Global metrics",
              "the compiled metrics and the step's results from global states",
              ["keras.src.trainers.trainer:Trainer.get_metrics_result",
               "keras.src.trainers.compile_utils:CompileMetrics.update_state",
               "keras.src.trainers.compile_utils:CompileMetrics.result",
               "keras.src.trainers.compile_utils:MetricsList.update_state"]),
    *_records(_K, "losses", "Loss normalisers",
              "a slice's loss weighted so that the value and the gradient are the global "
              "batch's",
              ["keras.src.losses.loss:Loss.__call__", "keras.src.losses.loss:reduce_values",
               "keras.src.losses.loss:apply_mask",
               "keras.src.trainers.compile_utils:CompileLoss.call"]),
    *_records(_K, "losses", "Loss normalisers",
              "the per-output loss means of a multi-output model weighted as the global "
              "batch's", ["keras.src.metrics.reduction_metrics:Mean.update_state"]),
    *_records(_K, "batchnorm", "Synchronized moments",
              "BatchNormalization's moments over the global batch",
              ["keras.src.layers.normalization.batch_normalization:BatchNormalization._moments"]),
    *_records(_K, "adapt", "Adapt reads whole batches",
              "preprocessing layers adapt to the whole data on every rank",
              ["keras.src.layers.preprocessing.normalization:Normalization.adapt",
               "keras.src.layers.preprocessing.discretization:Discretization.adapt",
               "keras.src.layers.preprocessing.index_lookup:IndexLookup.adapt",
               "keras.src.layers.preprocessing.integer_lookup:IntegerLookup.adapt",
               "keras.src.layers.preprocessing.string_lookup:StringLookup.adapt",
               "keras.src.layers.preprocessing.text_vectorization:TextVectorization.adapt",
               "keras.src.layers.preprocessing.feature_space:FeatureSpace.adapt"],
              reach="classes"),
    *_records(_K, "randomness", _RANDOM_ROWS,
              "initial weights are whole draws, not batch draws",
              ["keras.src.backend.tensorflow.core:Variable._initialize_with_initializer"],
              when=_GLOBAL),
    *_records(_K, "side_effects", "Rank-0 sections",
              "models, weights and backups written by rank 0 (every rank waits)",
              ["keras.src.models.model:Model.save", "keras.src.models.model:Model.save_weights",
               "keras.src.models.model:Model.export",
               "keras.src.callbacks.model_checkpoint:ModelCheckpoint._save_model",
               "keras.src.callbacks.backup_and_restore:BackupAndRestore._save_model",
               "keras.src.callbacks.backup_and_restore:BackupAndRestore.on_train_end"]),
    *_records(_K, "side_effects", "Rank-0 sections",
              "saving functions written by rank 0, under every public name",
              ["keras.src.saving.saving_api:save_model",
               "keras.src.saving.saving_api:save_weights"], reach="re-exports"),
    *_records(_K, "side_effects", "Reading rank 0's files", "loads read rank 0's copy",
              ["keras.src.models.model:Model.load_weights",
               "keras.src.callbacks.backup_and_restore:BackupAndRestore.on_train_begin"]),
    *_records(_K, "side_effects", "Reading rank 0's files",
              "loading functions read rank 0's copy, under every public name",
              ["keras.src.saving.saving_api:load_model",
               "keras.src.saving.saving_api:load_weights"], reach="re-exports"),
    *_records(_K, "side_effects", "Rank-0 sections",
              "TensorBoard and CSVLogger callbacks live on rank 0",
              ["keras.src.callbacks.callback_list:CallbackList.__init__"]),
    *_records(_K, "verify", "Proof runs", "record each layer call and each step",
              ["keras.src.layers.layer:Layer.__call__",
               "keras.src.callbacks.callback_list:CallbackList.on_train_batch_end"],
              when=_VERIFY),
    # ---- tf_keras
    *_records(_TK, "legacy_keras.training", "Global batch",
              "fit, evaluate and predict under global-batch semantics",
              ["tf_keras.src.engine.training:Model.make_train_function",
               "tf_keras.src.engine.training:Model.make_test_function",
               "tf_keras.src.engine.training:Model.make_predict_function",
               "tf_keras.src.engine.training:Model.fit", "tf_keras.src.engine.training:Model.evaluate",
               "tf_keras.src.engine.training:Model.predict",
               "tf_keras.src.engine.training:Model.train_on_batch",
               "tf_keras.src.engine.training:Model.test_on_batch",
               "tf_keras.src.engine.training:Model.predict_on_batch",
               "tf_keras.src.engine.training:Model.compile",
               "tf_keras.src.engine.data_adapter:DataHandler.enumerate_epochs",
               "tf_keras.src.engine.data_adapter:"
               "DataHandler._configure_dataset_and_inferred_steps"]),
    *_records(_TK, "legacy_keras.optimizers", "Where gradients are reduced",
              "the global gradient before the update",
              ["tf_keras.src.optimizers.optimizer:_BaseOptimizer.apply_gradients",
               "tf_keras.src.optimizers.legacy.optimizer_v2:OptimizerV2.apply_gradients",
               "tf_keras.src.mixed_precision.loss_scale_optimizer:"
               "LossScaleOptimizer.apply_gradients",
               "tf_keras.src.mixed_precision.loss_scale_optimizer:"
               "LossScaleOptimizerV3.apply_gradients"], reach="subclasses"),
    *_records(_TK, "legacy_keras.metrics", "Swapped metric state",
              "metric results from the states summed over ranks",
              ["tf_keras.src.metrics.base_metric:Metric.result",
               "tf_keras.src.engine.training:Model.get_metrics_result"], reach="subclasses"),
    *_records(_TK, "metrics_patches", "Global metrics",
              "a batch every rank holds whole counted once",
              ["tf_keras.src.metrics.base_metric:Metric.update_state"], reach="subclasses"),
    *_records(_TK, "metrics_patches", "Global metrics",
              "wraps the metric classes a script defines later",
              ["tf_keras.src.metrics.base_metric:Metric.__init_subclass__"], holds="added"),
    *_records(_TK, "losses", "Loss normalisers",
              "a slice's loss weighted so that the value and the gradient are the global "
              "batch's", ["tf_keras.src.losses:Loss.__call__",
                          "tf_keras.src.utils.losses_utils:apply_valid_mask"]),
    *_records(_TK, "legacy_keras.batchnorm", "Synchronized moments",
              "BatchNormalization's moments over the global batch (the unfused path)",
              ["tf_keras.src.layers.normalization.batch_normalization:"
               "BatchNormalizationBase._calculate_mean_and_var",
               "tf_keras.src.layers.normalization.batch_normalization:"
               "BatchNormalizationBase.build"]),
    *_records(_TK, "adapt", "Adapt reads whole batches",
              "preprocessing layers adapt to the whole data on every rank",
              ["tf_keras.src.engine.base_preprocessing_layer:PreprocessingLayer.adapt",
               "tf_keras.src.utils.feature_space:FeatureSpace.adapt"], reach="classes"),
    *_records(_TK, "randomness", _RANDOM_ROWS,
              "initial weights are whole draws, not batch draws",
              ["tf_keras.src.engine.base_layer:Layer.add_weight"], when=_GLOBAL),
    *_records(_TK, "legacy_keras.side_effects", "Rank-0 sections",
              "models, weights and backups written by rank 0 (every rank waits)",
              ["tf_keras.src.engine.training:Model.save",
               "tf_keras.src.engine.training:Model.save_weights",
               "tf_keras.src.engine.training:Model.export",
               "tf_keras.src.callbacks:ModelCheckpoint._save_model",
               "tf_keras.src.distribute.worker_training_state:WorkerTrainingState.back_up",
               "tf_keras.src.distribute.worker_training_state:"
               "WorkerTrainingState.backup_if_preempted",
               "tf_keras.src.distribute.worker_training_state:WorkerTrainingState.delete_backup"]),
    *_records(_TK, "legacy_keras.side_effects", "Rank-0 sections",
              "saving functions written by rank 0, under every public name",
              ["tf_keras.src.saving.saving_api:save_model",
               "tf_keras.src.saving.saving_api:save_weights"], reach="re-exports"),
    *_records(_TK, "legacy_keras.side_effects", "Reading rank 0's files",
              "loads read rank 0's copy", ["tf_keras.src.engine.training:Model.load_weights"]),
    *_records(_TK, "legacy_keras.side_effects", "Reading rank 0's files",
              "loading functions read rank 0's copy, under every public name",
              ["tf_keras.src.saving.saving_api:load_model",
               "tf_keras.src.saving.saving_api:load_weights"], reach="re-exports"),
    *_records(_TK, "legacy_keras.side_effects", "Rank-0 sections",
              "TensorBoard and CSVLogger callbacks live on rank 0",
              ["tf_keras.src.callbacks:CallbackList.__init__"]),
    *_records(_TK, "verify", "Proof runs", "record each layer call and each step",
              ["tf_keras.src.engine.base_layer:Layer.__call__",
               "tf_keras.src.callbacks:CallbackList.on_train_batch_end"], when=_VERIFY),
]

LINES = ("tensorflow", "keras", "tf_keras")


def of_line(line):
    return [p for p in PATCHES if p.line == line]


def resolve(patch):
    """(owner, attribute name, current value or None where the patch adds it)
    of `patch`'s target; raises ImportError or AttributeError where the
    installation lacks it (see Patch.holds)."""
    import importlib
    import inspect

    from tfmpi.transparent import versions

    owner = importlib.import_module(patch.module)
    *parents, name = patch.path.split(".")
    for part in parents:
        owner = versions.lookup(owner, part)
    if patch.holds == "added":
        return owner, name, owner.__dict__.get(name)
    if patch.holds == "own" and inspect.isclass(owner) and name not in owner.__dict__:
        raise AttributeError(f"{owner.__name__} does not define {name} itself")
    return owner, name, versions.lookup(owner, name)


_OURS = None


def is_ours(value):
    """True if `value`, or a function it wraps (functools.wraps' __wrapped__),
    is transparent mode's code."""
    import os

    global _OURS
    if _OURS is None:
        _OURS = os.path.dirname(os.path.realpath(__file__)) + os.sep
    seen = set()
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        for attr in ("__func__", "fget"):
            value = getattr(value, attr, value)
        code = getattr(value, "__code__", None)
        if code is not None and os.path.realpath(code.co_filename).startswith(_OURS):
            return True
        value = getattr(value, "__wrapped__", None)
    return False


def covering(module_name, path, value, owner=None):
    """The records that declare a patched attribute found at module_name:path
    (owner: the class holding it, where it is a class attribute)."""
    import inspect
    import sys

    found = []
    for p in PATCHES:
        if p.module == module_name and p.path == path:
            found.append(p)
            continue
        try:
            target_owner, name, current = resolve(p)
        except (ImportError, AttributeError):
            continue
        if target_owner is sys.modules.get(module_name) and path == name:
            found.append(p)  # the target named through another module path (tf.nn)
        elif p.reach == "re-exports" and value is current:
            found.append(p)
        elif (p.reach in ("subclasses", "classes") and owner is not None
              and inspect.isclass(target_owner) and path.rsplit(".", 1)[-1] == name
              and issubclass(owner, target_owner)):
            found.append(p)
    return found
