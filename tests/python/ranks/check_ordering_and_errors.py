"""Asynchronous out-of-order submission, and errors that must not hang."""

import random

import numpy as np
import pytest

import tfmpi


def test_out_of_order_submission(rank, size):
    names = [f"ooo.{i}" for i in range(60)]
    for iteration in range(3):  # later iterations go through the response cache
        order = names[:]
        random.Random(rank * 100 + iteration).shuffle(order)
        handles = {n: tfmpi.allreduce_async(np.full(5 + int(n.split(".")[1]), int(n.split(".")[1]), np.float64),
                                            op="sum", name=n) for n in order}
        for n in reversed(order):
            i = int(n.split(".")[1])
            np.testing.assert_array_equal(handles[n].wait(timeout=60), np.full(5 + i, i * size))
    assert tfmpi.engine_stats()["cache_hits"] > 0


def test_mismatched_shape_fails_on_every_rank(rank, size):
    if size == 1:
        pytest.skip("needs two ranks to disagree")
    shape = (4,) if rank == 0 else (5,)
    with pytest.raises(tfmpi.TensorMismatchError) as info:
        tfmpi.allreduce_async(np.ones(shape, np.float32), op="sum", name="mismatch").wait(timeout=30)
    msg = str(info.value)
    assert "'mismatch'" in msg and "rank 0 has [4]" in msg and "[5]" in msg
    # the engine stays usable
    assert tfmpi.allreduce(np.ones(2, np.float32), op="sum", name="after.mismatch").tolist() == [size] * 2


def test_mismatched_dtype_and_op(rank, size):
    if size == 1:
        pytest.skip("needs two ranks to disagree")
    dtype = np.float32 if rank == 0 else np.float64
    with pytest.raises(tfmpi.TensorMismatchError, match="dtype"):
        tfmpi.allreduce_async(np.ones(3, dtype), op="sum", name="mm.dtype").wait(timeout=30)
    op = "min" if rank == 0 else "max"
    with pytest.raises(tfmpi.TensorMismatchError, match="reduce op"):
        tfmpi.allreduce_async(np.ones(3, np.float32), op=op, name="mm.op").wait(timeout=30)


def test_duplicate_in_flight_name(rank, size):
    if size == 1:
        pytest.skip("alone, the first request may complete before the second is made")
    # Rank 0's 'dup' can't complete before the others submit theirs, which they
    # do only after the barrier that rank 0 reaches after its duplicate check.
    if rank == 0:
        h = tfmpi.allreduce_async(np.ones(3, np.float32), op="sum", name="dup")
        with pytest.raises(tfmpi.InvalidArgumentError, match="already in flight"):
            tfmpi.allreduce_async(np.ones(3, np.float32), op="sum", name="dup")
        tfmpi.barrier(name="dup.barrier")
    else:
        tfmpi.barrier(name="dup.barrier")
        h = tfmpi.allreduce_async(np.ones(3, np.float32), op="sum", name="dup")
    assert h.wait(timeout=30).tolist() == [size] * 3
    # the name is free again once complete
    assert tfmpi.allreduce(np.ones(1, np.float32), op="sum", name="dup").tolist() == [size]


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(tfmpi.InvalidArgumentError, match="unsupported dtype complex64"):
        tfmpi.allreduce(np.ones(2, np.complex64), name="bad.dtype")
    with pytest.raises(tfmpi.InvalidArgumentError, match="unknown reduce op 'mean'"):
        tfmpi.allreduce(np.ones(2, np.float32), op="mean", name="bad.op")
    with pytest.raises(tfmpi.InvalidArgumentError, match="numpy array"):
        tfmpi.allreduce([1.0, 2.0], name="bad.list")
    with pytest.raises(tfmpi.InvalidArgumentError, match="root 99"):
        tfmpi.broadcast(np.ones(2), root=99, name="bad.root")
