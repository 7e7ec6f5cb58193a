"""Side effects happen once, on rank 0: saving models and weights, and the
callbacks that write files (ModelCheckpoint, TensorBoard, CSVLogger, and the
backups of BackupAndRestore, which every rank still restores from)."""

import functools

from tfmpi.transparent import state

_RANK0_CALLBACKS = ("ModelCheckpoint", "TensorBoard", "CSVLogger")


def _rank0_only(original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if state.rank != 0:
            return None
        return original(*args, **kwargs)

    return wrapper


def install():
    from keras.src.callbacks import backup_and_restore, callback_list
    from keras.src.models.model import Model
    from keras.src.saving import saving_api

    for name in ("save", "save_weights", "export"):
        if hasattr(Model, name):
            setattr(Model, name, _rank0_only(getattr(Model, name)))
    saving_api.save_model = _rank0_only(saving_api.save_model)
    saving_api.save_weights = _rank0_only(saving_api.save_weights)

    B = backup_and_restore.BackupAndRestore
    B._save_model = _rank0_only(B._save_model)
    B.on_train_end = _rank0_only(B.on_train_end)

    original_init = callback_list.CallbackList.__init__

    @functools.wraps(original_init)
    def __init__(self, callbacks=None, *args, **kwargs):
        if state.rank != 0 and callbacks:
            callbacks = [c for c in callbacks
                         if not any(type(c).__name__ == n or
                                    any(b.__name__ == n for b in type(c).__mro__)
                                    for n in _RANK0_CALLBACKS)]
        original_init(self, callbacks, *args, **kwargs)

    callback_list.CallbackList.__init__ = __init__
