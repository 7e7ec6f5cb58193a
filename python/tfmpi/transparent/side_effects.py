"""Files are written once, by rank 0, and read back from rank 0's copy.

Writes (Note [Rank-0 sections], rank0.py): model.save, save_weights, export,
the saving API's functions, ModelCheckpoint's and BackupAndRestore's saves and
BackupAndRestore's clean-up, tf.train.Checkpoint's write and save. Every rank
waits for the write and raises what it raised. TensorBoard and CSVLogger exist
on rank 0 only (they write as they go); the others wait for them when
training ends, so their files are complete when fit returns.
Reads (Note [Reading rank 0's files], shipping.py): load_model, load_weights,
BackupAndRestore's restore, tf.train.Checkpoint's read and restore.
tf.saved_model.save and load are a write and a read of the same kind; summary
writers the script makes write on rank 0 only.
"""

import functools
import os
import sys

from tfmpi.transparent import rank0, shipping, state, versions

_RANK0_CALLBACKS = ("TensorBoard", "CSVLogger")


def replace_everywhere(original, wrapped, package):
    """Put `wrapped` wherever `package`'s modules hold `original` (public
    re-exports such as keras.saving.save_model)."""
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == package or mod_name.startswith(package + ".")):
            continue
        for attr, value in list(vars(mod).items()):
            if value is original:
                setattr(mod, attr, wrapped)


def wrap_methods(cls, wrap, names):
    for name in names:
        method = cls.__dict__.get(name)
        if method is not None and not getattr(method, "_tfmpi_wrapped", False):
            setattr(cls, name, wrap(f"{cls.__name__}.{name}", method))


def wrap_functions(module, wrap, names, package):
    for name in names:
        original = getattr(module, name, None)
        if original is not None and not getattr(original, "_tfmpi_wrapped", False):
            replace_everywhere(original, wrap(f"{package}.{name}", original), package)


def _writes(what, original):
    return rank0.writes(what, original)


def _reads(path_arg):
    return lambda what, original: shipping.reads(original, path_arg)


def _writes_files(callback):
    return any(base.__name__ in _RANK0_CALLBACKS for base in type(callback).__mro__)


def _waiting_class(Callback):
    class WaitForRank0(Callback):
        """Stands in, on ranks other than 0, for a callback that exists on
        rank 0 only: it waits for that callback's last write when training ends."""

        def __init__(self, name):
            super().__init__()
            self._tfmpi_name = name

        def on_train_end(self, logs=None):
            rank0.share_outcome(f"{self._tfmpi_name}.on_train_end", None)

    return WaitForRank0


def writers_on_rank0(CallbackList, Callback):
    """CallbackList keeps the file-writing callbacks on rank 0 (as rank-0-only
    code; training's end is a write the others wait for) and puts a
    WaitForRank0 in their place elsewhere."""
    original_init = CallbackList.__init__
    waiting = _waiting_class(Callback)

    def adopt(callback):
        if state.rank != 0:
            return waiting(type(callback).__name__)
        if getattr(callback, "_tfmpi_adopted", False):
            return callback
        for name in dir(type(callback)):
            if name.startswith("on_"):
                method = getattr(callback, name)
                what = f"{type(callback).__name__}.{name}"
                wrapped = rank0.writes(what, method) if name == "on_train_end" else rank0.alone(method)
                object.__setattr__(callback, name, wrapped)
        object.__setattr__(callback, "_tfmpi_adopted", True)
        return callback

    @functools.wraps(original_init)
    def __init__(self, callbacks=None, *args, **kwargs):
        if state.size > 1 and callbacks:
            callbacks = [adopt(c) if _writes_files(c) else c for c in callbacks]
        original_init(self, callbacks, *args, **kwargs)

    CallbackList.__init__ = __init__


def backup_restore_reads_rank0(BackupAndRestore):
    """BackupAndRestore restores from rank 0's backup folder."""
    original = BackupAndRestore.on_train_begin
    paths = ("_weights_path", "_training_metadata_path", "_prev_weights_path",
             "_prev_training_metadata_path")

    @functools.wraps(original)
    def on_train_begin(self, logs=None):
        if state.size == 1:
            return original(self, logs)
        versions.require_instance(self, ("backup_dir",) + paths, "BackupAndRestore")
        local = shipping.local_copy(self.backup_dir)
        saved = {name: getattr(self, name) for name in paths}
        if state.rank != 0:
            for name, path in saved.items():
                relative = os.path.relpath(path, self.backup_dir)
                object.__setattr__(self, name, os.path.join(local, relative))
        try:
            with shipping.section():
                return original(self, logs)
        finally:
            for name, path in saved.items():
                object.__setattr__(self, name, path)

    on_train_begin._tfmpi_wrapped = True
    BackupAndRestore.on_train_begin = on_train_begin


def _manager_restores_rank0(Manager):
    """CheckpointManager.restore_or_initialize decides from rank 0's folder."""
    original = Manager.restore_or_initialize

    @functools.wraps(original)
    def restore_or_initialize(self):
        if state.size == 1 or shipping.inside() or rank0.inside():
            return original(self)
        local = shipping.local_copy(self.directory)
        with shipping.section():
            if state.rank == 0:
                return original(self)
            copy = Manager(self.checkpoint, directory=local, max_to_keep=None)
            if copy.latest_checkpoint is None:
                return original(self)  # rank 0 found none either: initialise
            return copy.restore_or_initialize()

    restore_or_initialize._tfmpi_wrapped = True
    Manager.restore_or_initialize = restore_or_initialize


def install_checkpoint(tf):
    """tf.train.Checkpoint and CheckpointManager: written by rank 0, read
    from rank 0's copy."""
    wrap_methods(tf.train.Checkpoint, _writes, ("write", "save"))
    wrap_methods(tf.train.Checkpoint, _reads("save_path"), ("read", "restore"))
    wrap_methods(tf.train.CheckpointManager, _writes, ("save",))
    _manager_restores_rank0(tf.train.CheckpointManager)


def _replace_tf_function(module, name, wrap):
    """`module.name` (a TensorFlow function) and its public names
    (tensorflow._api.*, the tf.* modules) replaced by wrap(original). Keyed to
    the implementation: a public module made later (TensorFlow makes a second
    tf.saved_model when something imports it by that name) copies the
    wrapped function from there."""
    original = getattr(module, name)
    if getattr(original, "_tfmpi_wrapped", False):
        return
    wrapped = wrap(original)
    wrapped._tfmpi_wrapped = True
    setattr(module, name, wrapped)
    for package in ("tensorflow._api", "tensorflow.saved_model", "tensorflow.summary"):
        replace_everywhere(original, wrapped, package)


def install_saved_model():
    """tf.saved_model.save is rank 0's write; tf.saved_model.load (and what
    calls it, such as Keras' TFSMLayer) reads rank 0's copy."""
    if state.size == 1:
        return
    from tensorflow.python.saved_model import load, save

    _replace_tf_function(save, "save", lambda f: _writes("tf.saved_model.save", f))
    _replace_tf_function(load, "load", lambda f: shipping.reads(f, "export_dir"))


def install_summaries():
    """Ranks other than 0 get a summary writer that writes nothing: a log
    folder holds one run's events, rank 0's, as Keras' TensorBoard callback
    writes them (it exists on rank 0 only)."""
    if state.size == 1 or state.rank == 0:
        return
    from tensorflow.python.ops import summary_ops_v2

    def wrap(original):
        @functools.wraps(original)
        def create_file_writer(*args, **kwargs):
            return summary_ops_v2.create_noop_writer()
        return create_file_writer

    _replace_tf_function(summary_ops_v2, "create_file_writer_v2", wrap)


def install():
    from keras.src.callbacks import backup_and_restore, callback, callback_list, model_checkpoint
    from keras.src.models.model import Model
    from keras.src.saving import saving_api

    wrap_methods(Model, _writes, ("save", "save_weights", "export"))
    wrap_methods(Model, _reads("filepath"), ("load_weights",))
    wrap_functions(saving_api, _writes, ("save_model", "save_weights"), "keras")
    wrap_functions(saving_api, _reads("filepath"), ("load_model", "load_weights"), "keras")
    wrap_methods(model_checkpoint.ModelCheckpoint, _writes, ("_save_model",))
    B = backup_and_restore.BackupAndRestore
    wrap_methods(B, _writes, ("_save_model", "on_train_end"))
    backup_restore_reads_rank0(B)
    writers_on_rank0(callback_list.CallbackList, callback.Callback)
