"""tfmpi: MPI data-parallel training for TensorFlow, and its collective engine.

The numpy API below is a thin layer over the C++ engine (tfmpi._core)::

    import numpy as np, tfmpi
    tfmpi.init()
    total = tfmpi.allreduce(np.ones(4, np.float32), op="sum")   # == size everywhere
    tfmpi.shutdown()

Collectives are matched across ranks by name. Without an explicit name, each
call gets the next name in a per-process sequence, so every rank must then make
the same calls in the same order.
"""

import atexit
import itertools
import threading

import numpy as np

from tfmpi import _core
from tfmpi.errors import (
    AbortedError,
    BatchMismatchError,
    InvalidArgumentError,
    NotInitializedError,
    TensorMismatchError,
    TfmpiError,
    UnsupportedVersionError,
    WeightMismatchError,
)

__all__ = [
    "init", "shutdown", "set_exit_reason", "is_initialized", "rank", "size", "local_rank",
    "local_size", "allreduce", "allreduce_async", "broadcast", "broadcast_async", "allgather",
    "allgather_async", "barrier", "engine_stats", "TfmpiError", "NotInitializedError",
    "InvalidArgumentError", "TensorMismatchError", "AbortedError", "BatchMismatchError",
    "UnsupportedVersionError", "WeightMismatchError",
]

REDUCE_OPS = ("sum", "average", "min", "max", "product")

_counter = itertools.count()
_counter_lock = threading.Lock()


def _auto_name(kind):
    with _counter_lock:
        return f"{kind}.{next(_counter)}"


def init():
    """Start the engine (initialises MPI if needed). Idempotent. Rank 0 names each set
    TFMPI_* variable whose name looks like a misspelling of one tfmpi reads."""
    _core.init()
    from tfmpi import variables

    variables.say_misspelt_once(_core.rank())


def shutdown():
    """Collective: stop the engine once every rank has called shutdown()."""
    _core.shutdown()


def set_exit_reason(text):
    """Say why this rank is about to stop: the error its script fails with.

    When this rank then shuts down (``shutdown()``, or at exit), the other ranks'
    collectives that still wait for it fail with an ``AbortedError`` that says
    "rank 1 stopped with an error: <text>" rather than suggesting the ranks ran
    different numbers of steps. For example, from ``sys.excepthook``::

        tfmpi.set_exit_reason(f"{type(e).__name__}: {e}")

    No effect before ``init()`` or after ``shutdown()``; a later call replaces the text.
    """
    _core.set_exit_reason(str(text))


atexit.register(shutdown)

is_initialized = _core.is_initialized
rank = _core.rank
size = _core.size
local_rank = _core.local_rank
local_size = _core.local_size
engine_stats = _core.engine_stats
transport = _core.transport


def _as_input(array):
    if not isinstance(array, np.ndarray):
        raise InvalidArgumentError(
            f"expected a numpy array, got {type(array).__name__}; wrap it with np.asarray()")
    return np.require(array, requirements="C")  # keeps 0-d arrays 0-d


def allreduce_async(array, op="average", name=None):
    """Start an allreduce; returns a Handle whose wait() gives the result."""
    x = _as_input(array)
    return _core.allreduce_async(name or _auto_name("allreduce"), x, np.empty_like(x), op)


def allreduce(array, op="average", name=None):
    """Element-wise reduction over ranks: sum, average, min, max or product."""
    return allreduce_async(array, op, name).wait()


def broadcast_async(array, root=0, name=None):
    x = _as_input(array)
    return _core.broadcast_async(name or _auto_name("broadcast"), x, np.empty_like(x), root)


def broadcast(array, root=0, name=None):
    """Every rank receives rank `root`'s array (all ranks pass the same shape)."""
    return broadcast_async(array, root, name).wait()


def allgather_async(array, name=None):
    x = _as_input(array)
    return _core.allgather_async(name or _auto_name("allgather"), x)


def allgather(array, name=None):
    """Concatenate every rank's array along axis 0 (first dimensions may differ)."""
    return allgather_async(array, name).wait()


def barrier(name=None):
    """Block until every rank reaches this barrier."""
    _core.barrier_async(name or _auto_name("barrier")).wait()
