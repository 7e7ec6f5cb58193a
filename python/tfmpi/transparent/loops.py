"""Tracks whether Keras' own fit/evaluate/predict loop is running (they slice
batches inside the step; custom-loop slicing must then stay off)."""

import contextlib
import threading

_local = threading.local()


def inside_keras_loop():
    return getattr(_local, "depth", 0) > 0


@contextlib.contextmanager
def keras_loop():
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1
