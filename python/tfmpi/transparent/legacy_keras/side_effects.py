"""tf_keras side effects (see ../side_effects.py): saving, ModelCheckpoint and
BackupAndRestore's backups written by rank 0 (every rank waits); loads read
rank 0's copy; TensorBoard and CSVLogger live on rank 0. BackupAndRestore
restores through tf.train.CheckpointManager, whose restore reads rank 0's
folder (installed with the TensorFlow patches)."""

from tfmpi.transparent.side_effects import (_reads, _writes, wrap_functions, wrap_methods,
                                            writers_on_rank0)


def install():
    from tf_keras.src import callbacks
    from tf_keras.src.distribute import worker_training_state
    from tf_keras.src.engine import training
    from tf_keras.src.saving import saving_api

    Model = training.Model
    wrap_methods(Model, _writes, ("save", "save_weights", "export"))
    wrap_methods(Model, _reads("filepath"), ("load_weights",))
    wrap_functions(saving_api, _writes, ("save_model", "save_weights"), "tf_keras")
    wrap_functions(saving_api, _reads("filepath"), ("load_model", "load_weights"), "tf_keras")
    wrap_methods(callbacks.ModelCheckpoint, _writes, ("_save_model",))
    wrap_methods(worker_training_state.WorkerTrainingState, _writes,
                 ("back_up", "backup_if_preempted", "delete_backup"))
    writers_on_rank0(callbacks.CallbackList, callbacks.Callback)
