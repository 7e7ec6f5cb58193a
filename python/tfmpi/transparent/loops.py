"""Tracks which of Keras' own loops (fit / evaluate / predict / *_on_batch) is
running: they slice batches inside the step, so custom-loop slicing must stay
off, and per-rank mode shards only fit's training data."""

import contextlib
import threading

_local = threading.local()


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def inside_keras_loop():
    return bool(_stack())


def innermost():
    """Name of the innermost running Keras loop, or None."""
    stack = _stack()
    return stack[-1]["name"] if stack else None


def claim_training_iterator():
    """True once per fit call: for the first epoch iterator fit creates (its
    training data; validation iterators come later)."""
    stack = _stack()
    if not stack or stack[-1]["name"] != "fit" or stack[-1]["claimed"]:
        return False
    stack[-1]["claimed"] = True
    return True


@contextlib.contextmanager
def keras_loop(name):
    _stack().append({"name": name, "claimed": False})
    try:
        yield
    finally:
        _stack().pop()
