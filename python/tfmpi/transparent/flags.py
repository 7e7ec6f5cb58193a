"""Per-thread markers of what transparent mode is in the middle of (a loss
call, a metric result computed from given state), so that nested calls know."""

import contextlib
import threading

_local = threading.local()


@contextlib.contextmanager
def inside(flag):
    setattr(_local, flag, getattr(_local, flag, 0) + 1)
    try:
        yield
    finally:
        setattr(_local, flag, getattr(_local, flag) - 1)


def active(flag):
    return getattr(_local, flag, 0) > 0
