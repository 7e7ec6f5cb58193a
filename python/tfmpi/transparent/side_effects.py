"""Side effects happen once, on rank 0: saving models and weights, and the
callbacks that write files (ModelCheckpoint, TensorBoard, CSVLogger, and the
backups of BackupAndRestore, which every rank still restores from)."""

import functools
import sys

from tfmpi.transparent import state

_RANK0_CALLBACKS = ("ModelCheckpoint", "TensorBoard", "CSVLogger")


def rank0_only(original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if state.rank != 0:
            return None
        return original(*args, **kwargs)

    return wrapper


def rank0_only_everywhere(module, name, package):
    """Make module.<name> rank-0-only, also where `package`'s public API
    re-exports the same function object (keras.saving.save_model, ...)."""
    original = getattr(module, name)
    wrapped = rank0_only(original)
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == package or mod_name.startswith(package + ".")):
            continue
        for attr, value in list(vars(mod).items()):
            if value is original:
                setattr(mod, attr, wrapped)
    return wrapped


def saving_on_rank0_only(Model, saving_api, package):
    """Model.save / save_weights / export and the saving API's functions."""
    for name in ("save", "save_weights", "export"):
        if hasattr(Model, name):
            setattr(Model, name, rank0_only(getattr(Model, name)))
    for name in ("save_model", "save_weights"):
        rank0_only_everywhere(saving_api, name, package)


def _writes_files(callback):
    return any(base.__name__ in _RANK0_CALLBACKS for base in type(callback).__mro__)


def drop_writers_off_rank0(CallbackList):
    """CallbackList keeps the file-writing callbacks on rank 0 only."""
    original_init = CallbackList.__init__

    @functools.wraps(original_init)
    def __init__(self, callbacks=None, *args, **kwargs):
        if state.rank != 0 and callbacks:
            callbacks = [c for c in callbacks if not _writes_files(c)]
        original_init(self, callbacks, *args, **kwargs)

    CallbackList.__init__ = __init__


def install():
    from keras.src.callbacks import backup_and_restore, callback_list
    from keras.src.models.model import Model
    from keras.src.saving import saving_api

    saving_on_rank0_only(Model, saving_api, "keras")

    B = backup_and_restore.BackupAndRestore
    B._save_model = rank0_only(B._save_model)
    B.on_train_end = rank0_only(B.on_train_end)
    drop_writers_off_rank0(callback_list.CallbackList)
