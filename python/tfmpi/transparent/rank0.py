"""Work that rank 0 does alone (writing files), and how the other ranks wait
for it and learn its outcome.

Note [Rank-0 sections]
Files are written once, by rank 0: model.save, save_weights, export,
ModelCheckpoint, BackupAndRestore's backups, the logs of TensorBoard and
CSVLogger. A script may read a file back right after writing it, on any rank
(load_weights after save_weights, a checkpoint restored after a save to the
same path). So a write is a collective step: rank 0 runs it, then tells every
rank how it went (one small broadcast, then the pickled outcome), and no rank
goes past the write before it is complete; if it raised on rank 0, every rank
raises the same exception. Code running on rank 0 alone must not start
collectives the others never join: inside a section, transparent mode's
collectives (global metric results, global losses) fall back to rank 0's
local values, and nested writes run without another handshake.
"""

import functools
import pickle

import numpy as np

import tfmpi
from tfmpi.transparent import flags, state


def inside():
    """True while this thread runs rank-0-only code."""
    return flags.active("rank0")


def section():
    return flags.inside("rank0")


def broadcast_bytes(payload, what):
    """Rank 0's `payload` (bytes) on every rank; other ranks pass None."""
    size = np.array([len(payload) if state.rank == 0 else 0], np.int64)
    size = int(tfmpi.broadcast(size, root=0, name=f"tfmpi/rank0/{what}/size")[0])
    buffer = np.frombuffer(payload, np.uint8).copy() if state.rank == 0 else np.empty(size, np.uint8)
    if size == 0:
        return b""
    return tfmpi.broadcast(buffer, root=0, name=f"tfmpi/rank0/{what}/data").tobytes()


def _encode_outcome(result, error):
    if error is None:
        try:
            return pickle.dumps(("ok", result))
        except Exception:
            return pickle.dumps(("ok", None))
    try:
        payload = pickle.dumps(("error", error))
        if str(pickle.loads(payload)[1]) == str(error):
            return payload
    except Exception:
        pass
    # Not picklable, or its message is lost on the way (TensorFlow's errors).
    cls = type(error)
    return pickle.dumps(("described", (cls.__module__, cls.__qualname__, str(error))))


def _rebuild(module, qualname, text):
    import importlib

    try:
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        import tensorflow as tf

        if issubclass(cls, tf.errors.OpError):
            return cls(None, None, text)
        error = cls(text)
        if str(error) == text:
            return error
    except Exception:
        pass
    return RuntimeError(f"{module}.{qualname}: {text}")


def _decode_outcome(payload, what):
    kind, value = pickle.loads(payload)
    if kind == "ok":
        return value
    error = value if kind == "error" else _rebuild(*value)
    error.add_note(f"tfmpi: raised on rank 0 by {what}; every rank raises it")
    raise error


def share_outcome(what, run):
    """Rank 0 runs `run()`; every rank returns its result or raises its exception."""
    if state.size == 1 or inside():
        return run() if state.rank == 0 else None
    from tfmpi.transparent import sharded_update

    if not sharded_update.enabled():
        return _shared_outcome(what, run)
    with sharded_update.state_on_rank0():  # the optimizer state written is the 1-process one
        return _shared_outcome(what, run)


def _shared_outcome(what, run):
    result, error = None, None
    if state.rank == 0:
        with section():
            try:
                result = run()
            except BaseException as e:  # the others must hear of it too
                error = e
        payload = _encode_outcome(result, error)
    else:
        payload = None
    payload = broadcast_bytes(payload, "outcome")
    if state.rank == 0:
        if error is not None:
            raise error
        return result
    return _decode_outcome(payload, what)


def writes(what, original):
    """`original` made a rank-0 write every rank waits for (share_outcome)."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return share_outcome(what, lambda: original(*args, **kwargs))

    wrapper._tfmpi_wrapped = True
    return wrapper


def alone(original):
    """`original` run as rank-0-only code (no handshake: for callbacks that
    exist on rank 0 only)."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        with section():
            return original(*args, **kwargs)

    wrapper._tfmpi_wrapped = True
    return wrapper
