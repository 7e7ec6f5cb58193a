"""Note [Python buffers in flight]: a handle dropped (or timed out, then dropped)
before its collective completes never lets the engine touch freed memory.

Rank 0 starts collectives and drops their handles; the other ranks join only later.
Meanwhile rank 0 allocates lots of memory of its own, which would reuse freed
buffers: the engine writing into them would corrupt it (or crash, for the large ones,
whose pages are unmapped when freed), and the other ranks would gather garbage."""

import gc
import time
import weakref

import numpy as np
import pytest

import tfmpi

SMALL = 1000          # fused path: copied through the fusion buffer
LARGE = 1 << 20       # 4 MiB of float32: direct path, reduced in the array itself


def _churn():
    """Allocations that reuse freed memory; checked intact afterwards."""
    return [np.full(n, 7.0, np.float32) for n in [SMALL] * 200 + [LARGE] * 8]


def _intact(churn):
    return all(bool((c == 7.0).all()) for c in churn)


def _late_join(name, rank):
    """Rank 0 starts first; the others start after 'name.go' and a pause."""
    tfmpi.barrier(name=f"{name}.go")
    if rank != 0:
        time.sleep(0.5)


@pytest.fixture(autouse=True)
def _need_two_ranks(size):
    if size == 1:
        pytest.skip("needs a rank that joins later")


def test_dropped_allreduce_handles(rank, size):
    values = {n: np.arange(n, dtype=np.float32) % 97 for n in (SMALL, LARGE)}
    if rank == 0:
        inputs = {n: values[n].copy() for n in values}
        alive = [weakref.ref(x) for x in inputs.values()]
        for n, x in inputs.items():
            tfmpi.allreduce_async(x, op="sum", name=f"dropped.{n}")  # handle dropped at once
        del inputs, x
        gc.collect()
        assert all(ref() is not None for ref in alive), "in flight: kept alive"
        churn = _churn()
    _late_join("dropped", rank)
    if rank != 0:
        for n, v in values.items():
            got = tfmpi.allreduce(v.copy(), op="sum", name=f"dropped.{n}")
            np.testing.assert_array_equal(got, v * size)
    tfmpi.barrier(name="dropped.done")  # after the dropped ones completed everywhere
    if rank == 0:
        assert _intact(churn), "the engine wrote into freed memory"
        gc.collect()
        assert all(ref() is None for ref in alive), "released once complete"


def test_dropped_allgather_handle(rank, size):
    mine = np.full((3, LARGE // 4), rank + 1, np.float32)
    if rank == 0:
        x = mine.copy()
        alive = weakref.ref(x)
        tfmpi.allgather_async(x, name="dropped.gather")
        del x
        gc.collect()
        assert alive() is not None
        churn = _churn()
    _late_join("dropped.gather", rank)
    if rank != 0:
        got = tfmpi.allgather(mine, name="dropped.gather")
        expected = np.concatenate([np.full((3, LARGE // 4), r + 1, np.float32)
                                   for r in range(size)])
        np.testing.assert_array_equal(got, expected)  # rank 0's block was read intact
    tfmpi.barrier(name="dropped.gather.done")
    if rank == 0:
        assert _intact(churn)
        gc.collect()
        assert alive() is None


def test_timed_out_then_dropped_handle(rank, size):
    if rank == 0:
        h = tfmpi.allreduce_async(np.full(LARGE, 2.0, np.float32), op="sum", name="timedout")
        with pytest.raises(TimeoutError, match="'timedout' did not complete within 0.2 s"):
            h.wait(timeout=0.2)
        del h
        gc.collect()
        churn = _churn()
        kept = tfmpi.allreduce_async(np.full(SMALL, 3.0, np.float32), op="sum", name="kept")
        with pytest.raises(TimeoutError):
            kept.wait(timeout=0.1)
    _late_join("timedout", rank)
    if rank != 0:
        got = tfmpi.allreduce(np.full(LARGE, 2.0, np.float32), op="sum", name="timedout")
        np.testing.assert_array_equal(got, np.full(LARGE, 2.0 * size, np.float32))
        kept = tfmpi.allreduce_async(np.full(SMALL, 3.0, np.float32), op="sum", name="kept")
    # a handle that timed out can still be waited for
    np.testing.assert_array_equal(kept.wait(timeout=60), np.full(SMALL, 3.0 * size, np.float32))
    tfmpi.barrier(name="timedout.done")
    if rank == 0:
        assert _intact(churn)
