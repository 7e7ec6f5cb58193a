"""tfmpi.data: row readers as tf.data sources, in one process. Round trips
against numpy, Python's csv module, h5py and netCDF4 (skipped without it) on
generated files; shuffled orders that agree across processes and cover every
row once per epoch; partitions through the _tfmpi_rows hook (Note [The
_tfmpi_rows hook]) that cover every row exactly once for 1..8 ranks; errors
that name the file and the position."""

import csv as pycsv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="tfmpi.data builds tf.data pipelines")
import tfmpi.data  # noqa: E402


def rows_of(ds):
    """Every element of `ds` as numpy (a tuple of arrays for tuple elements)."""
    return [tuple(np.asarray(c) for c in e) if isinstance(e, tuple) else np.asarray(e)
            for e in ds.as_numpy_iterator()]


@pytest.mark.parametrize("dtype,shape", [
    (np.float32, (37, 3)), (np.int16, (10,)), (np.uint8, (9, 2, 5)), (np.bool_, (6, 2)),
    (np.float16, (5, 4)), (np.float64, (1, 2)), (np.uint64, (0, 3)), (np.int8, (0,)),
])
def test_npy_round_trip(tmp_path, dtype, shape):
    rng = np.random.default_rng(0)
    a = (rng.random(shape) * 100).astype(dtype)
    np.save(tmp_path / "a.npy", a)
    for chunk_rows in (None, 4):
        ds = tfmpi.data.npy(str(tmp_path / "a.npy"), chunk_rows=chunk_rows)
        assert ds.element_spec == tf.TensorSpec(shape[1:], tf.as_dtype(dtype))
        assert ds._tfmpi_rows.num_rows == shape[0] == int(ds.cardinality())
        got = rows_of(ds)
        assert len(got) == shape[0]
        if got:
            np.testing.assert_array_equal(np.stack(got), a)


def write_tricky_csv(path, n):
    """A CSV written by Python's csv module with CRLF line ends and quoted
    text holding commas, quotes and line breaks."""
    rng = np.random.default_rng(1)
    with open(path, "w", newline="") as f:
        w = pycsv.writer(f, lineterminator="\r\n")
        w.writerow(["id", "note", "x", "flag"])
        for i in range(n):
            note = ["plain", "a, b", 'say "hi"', "two\nlines\r\nthree"][i % 4]
            w.writerow([i, note, f"{rng.normal():.6g}", i % 3 == 0])


def test_csv_round_trip_against_the_csv_module(tmp_path):
    path = str(tmp_path / "t.csv")
    write_tricky_csv(path, 41)
    with open(path, newline="") as f:
        ref = list(pycsv.reader(f))[1:]
    ds = tfmpi.data.csv(path, columns=["x", "id", "flag"],
                        dtypes=[tf.float64, tf.int64, tf.bool], chunk_rows=5)
    got = rows_of(ds)
    assert len(got) == len(ref) == 41
    for (x, i, flag), r in zip(got, ref):
        assert (i, x, flag) == (int(r[0]), float(r[2]), r[3] == "True")
    # One column by position, as a scalar per element; dtypes by name.
    ids = rows_of(tfmpi.data.csv(path, columns="0", dtypes={"id": tf.int32}))
    assert [int(v) for v in ids] == list(range(41))


def test_csv_without_header_and_other_delimiter(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("1\t2.5\n\n3\t4.5\n")
    ds = tfmpi.data.csv(str(path), header=False, delimiter="\t", dtypes=[tf.int32, tf.float32])
    assert [tuple(map(float, r)) for r in rows_of(ds)] == [(1, 2.5), (3, 4.5)]


def test_hdf5_round_trip_against_h5py(tmp_path):
    h5py = pytest.importorskip("h5py", reason="h5py writes the reference file")
    rng = np.random.default_rng(2)
    x = rng.random((53, 4, 2)).astype(np.float32)
    y = rng.integers(0, 10, 53).astype(np.int64)
    b = rng.random(53) > 0.5
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f["x"] = x
        f.create_group("g")["y"] = y
        f["b"] = b
        f["empty"] = np.zeros((0, 3), np.float64)
    ds = tfmpi.data.hdf5(path, datasets=["x", "g/y", "b"], chunk_rows=7)
    got = rows_of(ds)
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), x)
    np.testing.assert_array_equal(np.array([g[1] for g in got]), y)
    np.testing.assert_array_equal(np.array([g[2] for g in got]), b)
    assert rows_of(tfmpi.data.hdf5(path, datasets="empty")) == []


def test_netcdf_round_trip_against_netcdf4(tmp_path):
    netCDF4 = pytest.importorskip(
        "netCDF4", reason="netCDF4 (pip) writes the reference file; scripts/setup.sh installs it")
    rng = np.random.default_rng(3)
    temp = rng.random((23, 2, 3)).astype(np.float32)
    count = rng.integers(-5, 5, 23).astype(np.int16)
    path = str(tmp_path / "d.nc")
    with netCDF4.Dataset(path, "w", format="NETCDF4") as f:
        f.createDimension("time", None)
        f.createDimension("y", 2)
        f.createDimension("x", 3)
        f.createVariable("temp", "f4", ("time", "y", "x"))[:] = temp
        f.createGroup("g").createVariable("count", "i2", ("time",))[:] = count
    got = rows_of(tfmpi.data.netcdf(path, variables=["temp", "g/count"], chunk_rows=4))
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), temp)
    np.testing.assert_array_equal(np.array([g[1] for g in got]), count)
    with pytest.raises(tf.errors.NotFoundError, match="d.nc: no variable 'nope'"):
        tfmpi.data.netcdf(path, variables="nope")


ORDERS = """
import json, sys
import tensorflow as tf, tfmpi.data
def orders(seed):
    ds = tfmpi.data.npy(sys.argv[1], shuffle=True, seed=seed, chunk_rows=3)
    return [[int(v) for v in ds.as_numpy_iterator()] for _ in range(2)]
by_seed = orders(5)
tf.random.set_seed(7)
print(json.dumps([by_seed, orders(None)]))
"""


def shuffled_orders(path, seed):
    """Two epochs of row values, in this process."""
    ds = tfmpi.data.npy(path, shuffle=True, seed=seed, chunk_rows=3)
    return [[int(v) for v in ds.as_numpy_iterator()] for _ in range(2)]


def test_shuffle_agrees_across_processes_and_covers_every_row(tmp_path):
    path = str(tmp_path / "r.npy")
    np.save(path, np.arange(50, dtype=np.int64))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", ORDERS, path], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    mine = [shuffled_orders(path, 5)]
    tf.random.set_seed(7)  # seed=None: the global seed decides
    try:
        mine.append(shuffled_orders(path, None))
    finally:
        tf.random.set_seed(None)
    assert mine == theirs
    for epochs in mine:
        for epoch in epochs:
            assert sorted(epoch) == list(range(50))
        assert epochs[0] != epochs[1], "each epoch is a new permutation"
        assert epochs[0] != list(range(50))
    assert mine[0] != mine[1], "the seed decides the order"


def rank_indices(index_dataset, rank, size, global_batch):
    """Rank `rank`'s slice of every global batch of `index_dataset`, the way
    element-level sharding selects it (near-equal contiguous slices)."""
    lo = global_batch * rank // size
    hi = global_batch * (rank + 1) // size
    return (index_dataset.enumerate()
            .filter(lambda pos, _: tf.logical_and(pos % global_batch >= lo,
                                                  pos % global_batch < hi))
            .map(lambda _, index: index))


@pytest.mark.parametrize("shuffle", [False, True])
def test_partitions_cover_every_row_exactly_once(tmp_path, shuffle):
    a = np.arange(61 * 2, dtype=np.float32).reshape(61, 2)
    path = str(tmp_path / "p.npy")
    np.save(path, a)
    for size in range(1, 9):
        seen = []
        for rank in range(size):
            # Each rank's own dataset object, as in its own process.
            rows = tfmpi.data.npy(path, shuffle=shuffle, seed=3, chunk_rows=4)._tfmpi_rows
            assert rows.num_rows == 61
            part = rows.from_indices(rank_indices(rows.index_dataset, rank, size, 16))
            for row in part.as_numpy_iterator():
                seen.append(int(row[0]) // 2)
                np.testing.assert_array_equal(row, a[seen[-1]])
        assert sorted(seen) == list(range(61)), f"{size} ranks"


def test_bytes_read_is_the_rows_read(tmp_path):
    a = np.zeros((400, 256), np.float32)  # 1 KiB rows
    path = str(tmp_path / "b.npy")
    np.save(path, a)
    rows = tfmpi.data.npy(path)._tfmpi_rows
    before = tfmpi.data.bytes_read()
    part = rows.from_indices(rank_indices(rows.index_dataset, 1, 4, 40))
    assert len(list(part.as_numpy_iterator())) == 100
    read = tfmpi.data.bytes_read() - before
    header = 128  # np.save's header; the kernel reads it once when it opens the file
    assert 100 * 1024 <= read <= 100 * 1024 + header + 16

    # CSV: the file was indexed when the dataset was built (Note [Shared CSV
    # indexes]); a rank then reads its rows and the header record again.
    text = "a,b\n" + "".join(f"{i},{i % 10}\n" for i in range(1000, 1400))  # 7-byte rows
    (tmp_path / "b.csv").write_text(text)
    rows = tfmpi.data.csv(str(tmp_path / "b.csv"), dtypes=tf.int32)._tfmpi_rows
    before = tfmpi.data.bytes_read()
    part = rows.from_indices(rank_indices(rows.index_dataset, 1, 4, 40))
    assert len(list(part.as_numpy_iterator())) == 100
    assert tfmpi.data.bytes_read() - before == 100 * 7 + len("a,b\n")


def test_errors_name_the_file_and_the_position(tmp_path):
    missing = str(tmp_path / "missing.npy")
    with pytest.raises(tf.errors.NotFoundError, match="missing.npy: cannot open"):
        tfmpi.data.npy(missing)

    trunc = tmp_path / "trunc.npy"
    np.save(trunc, np.zeros((10, 4), np.float32))
    trunc.write_bytes(trunc.read_bytes()[:-20])
    with pytest.raises(tf.errors.DataLossError, match="trunc.npy: file is truncated"):
        tfmpi.data.npy(str(trunc))

    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,oops\n")
    ds = tfmpi.data.csv(str(bad), dtypes=tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"bad.csv: row 1 \(byte offset 8\), column 'b': 'oops' does not parse as int64"):
        rows_of(ds)
    short = tmp_path / "short.csv"
    short.write_text("a,b\n1,2\n3\n")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"short.csv: row 1 .* has 1 fields"):
        rows_of(tfmpi.data.csv(str(short)))
    with pytest.raises(tf.errors.NotFoundError, match="no column 'c'"):
        tfmpi.data.csv(str(short), columns=["c"])

    h5py = pytest.importorskip("h5py", reason="h5py writes the HDF5 file")
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["x"] = np.zeros(3)
        f["s"] = np.array([b"ab", b"cd"])
    with pytest.raises(tf.errors.NotFoundError, match="d.h5: no dataset 'y'"):
        tfmpi.data.hdf5(str(tmp_path / "d.h5"), datasets=["x", "y"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="dataset 's': unsupported element type"):
        tfmpi.data.hdf5(str(tmp_path / "d.h5"), datasets="s")

