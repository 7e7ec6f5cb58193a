"""Results of every collective, computed in closed form from the world size."""

import numpy as np
import pytest

import tfmpi

FLOATS = ["float16", "float32", "float64"]
INTS = ["int32", "int64", "uint8"]


def _dtypes():
    out = FLOATS + INTS
    try:
        import ml_dtypes  # noqa: F401  (ships with TensorFlow)
        out.append("bfloat16")
    except ImportError:
        pass
    return out


def _np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def test_world(rank, size):
    assert 0 <= rank < size
    assert 1 <= tfmpi.local_size() <= size
    assert 0 <= tfmpi.local_rank() < tfmpi.local_size()
    ranks = tfmpi.allgather(np.array([rank], np.int64), name="world.ranks")
    assert ranks.tolist() == list(range(size))


@pytest.mark.parametrize("dtype", _dtypes())
@pytest.mark.parametrize("op", ["sum", "average", "min", "max", "product"])
def test_allreduce(dtype, op, rank, size):
    if op == "average" and dtype in INTS:
        with pytest.raises(tfmpi.InvalidArgumentError, match="average"):
            tfmpi.allreduce(np.ones(3, dtype), op=op, name=f"ar.{dtype}.{op}")
        return
    dt = _np_dtype(dtype)
    # values r+1 (product uses 1 except one 2 per rank to stay exact in uint8/float16)
    x = np.full((2, 3), rank + 1).astype(dt)
    if op == "product":
        x = np.where(np.arange(6).reshape(2, 3) == rank % 6, 2, 1).astype(dt)
    got = tfmpi.allreduce(x, op=op, name=f"ar.{dtype}.{op}")
    assert got.dtype == dt and got.shape == (2, 3)
    ranks = np.arange(1, size + 1)
    expected = {
        "sum": ranks.sum(), "average": ranks.mean(), "min": 1, "max": size,
    }.get(op)
    if op == "product":
        counts = np.bincount(np.arange(size) % 6, minlength=6)
        expected = (2.0 ** counts).reshape(2, 3)
    np.testing.assert_allclose(got.astype(np.float64), np.broadcast_to(expected, (2, 3)),
                               rtol=1e-2 if dtype in ("float16", "bfloat16") else 1e-6)


def test_allreduce_bool(rank, size):
    x = np.array([True, rank == 0, False])
    assert tfmpi.allreduce(x, op="max", name="ar.bool.max").tolist() == [True, True, False]
    assert tfmpi.allreduce(x, op="min", name="ar.bool.min").tolist() == [True, size == 1, False]
    with pytest.raises(tfmpi.InvalidArgumentError, match="bool"):
        tfmpi.allreduce(x, op="sum", name="ar.bool.sum")


@pytest.mark.parametrize("dtype", _dtypes() + ["bool"])
def test_broadcast_every_root(dtype, rank, size):
    dt = _np_dtype(dtype)
    for root in range(size):
        x = (np.arange(7) + 10 * rank).astype(dt)
        got = tfmpi.broadcast(x, root=root, name=f"bc.{dtype}.{root}")
        np.testing.assert_array_equal(got, (np.arange(7) + 10 * root).astype(dt))


@pytest.mark.parametrize("dtype", _dtypes() + ["bool"])
def test_allgather_ragged(dtype, rank, size):
    dt = _np_dtype(dtype)
    rows = rank if rank % 2 else rank + 1   # rank 1 contributes 1, rank 2 contributes 3, ...
    rows = 0 if (size > 2 and rank == size - 1) else rows  # one rank with no rows
    x = np.full((rows, 2), rank % 2 if dtype == "bool" else rank).astype(dt)
    got = tfmpi.allgather(x, name=f"ag.{dtype}")
    all_rows = tfmpi.allgather(np.array([rows]), name=f"ag.{dtype}.rows")
    assert got.shape == (int(all_rows.sum()), 2)
    expected = np.concatenate([np.full((int(n), 2), r % 2 if dtype == "bool" else r)
                               for r, n in enumerate(all_rows)]).astype(dt)
    np.testing.assert_array_equal(got, expected)


def test_zero_length_and_scalar(rank, size):
    empty = tfmpi.allreduce(np.zeros((0, 5), np.float32), op="sum", name="zero")
    assert empty.shape == (0, 5)
    s = tfmpi.allreduce(np.array(2.0, np.float64), op="sum", name="scalar")
    assert s.shape == () and float(s) == 2.0 * size
    with pytest.raises(tfmpi.InvalidArgumentError, match="at least one dimension"):
        tfmpi.allgather(np.array(1.0), name="ag.scalar")


def test_non_contiguous_input(size):
    base = np.arange(20, dtype=np.float32).reshape(4, 5)
    got = tfmpi.allreduce(base[:, ::2], op="sum", name="strided")
    np.testing.assert_array_equal(got, base[:, ::2] * size)


def test_barrier(rank):
    for i in range(3):
        tfmpi.barrier(name=f"barrier.{i}")


def test_large_direct_path(rank, size):
    x = np.full(3 << 20, rank + 1, np.float32)  # 12 MiB: above the direct threshold
    got = tfmpi.allreduce(x, op="average", name="big")
    np.testing.assert_allclose(got[[0, 12345, -1]], (size + 1) / 2)


def test_auto_names_are_matched_in_call_order(rank, size):
    a = tfmpi.allreduce(np.ones(2, np.float32), op="sum")
    b = tfmpi.allreduce(np.full(3, 2.0, np.float32), op="sum")
    assert a.tolist() == [size] * 2 and b.tolist() == [2.0 * size] * 3
