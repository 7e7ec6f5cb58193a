"""tf_keras side effects on rank 0 only (see ../side_effects.py): saving, the
file-writing callbacks, and BackupAndRestore's backups (every rank restores)."""

from tfmpi.transparent.side_effects import (drop_writers_off_rank0, rank0_only,
                                            saving_on_rank0_only)


def install():
    from tf_keras.src import callbacks
    from tf_keras.src.distribute import worker_training_state
    from tf_keras.src.engine import training
    from tf_keras.src.saving import saving_api

    saving_on_rank0_only(training.Model, saving_api, "tf_keras")

    State = worker_training_state.WorkerTrainingState
    State.back_up = rank0_only(State.back_up)
    State.backup_if_preempted = rank0_only(State.backup_if_preempted)
    State.delete_backup = rank0_only(State.delete_backup)
    drop_writers_off_rank0(callbacks.CallbackList)
