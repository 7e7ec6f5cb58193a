"""tfmpi.data.hdf5 against the usual ways of feeding HDF5 to tf.data
(docs/performance.md, "Reading HDF5 files"). One run:

    python bench/input/readers.py [--rows 200000] [--width 64]

Writes a file of `rows` x `width` float32 plus int64 labels, then times a full
pass in batches of 256 through: tfmpi.data.hdf5; h5py with
tf.data.Dataset.from_generator yielding rows (the common recipe); h5py
yielding whole batches from from_generator; from_tensor_slices on the arrays
already in memory. Prints rows/s and the ratios to the per-row generator.
"""

import argparse
import os
import tempfile
import time

import h5py
import numpy as np
import tensorflow as tf

import tfmpi.data


def timed(dataset):
    best = None
    for _ in range(2):
        start, rows = time.perf_counter(), 0
        for x, _y in dataset:
            rows += int(x.shape[0])
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return rows / best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200000)
    p.add_argument("--width", type=int, default=64)
    args = p.parse_args()
    x = np.random.default_rng(0).random((args.rows, args.width), dtype=np.float32)
    y = np.arange(args.rows, dtype=np.int64)
    spec = (tf.TensorSpec([args.width], tf.float32), tf.TensorSpec([], tf.int64))
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "data.h5")
        with h5py.File(path, "w") as f:
            f["x"], f["y"] = x, y

        def rows():
            with h5py.File(path, "r") as f:
                fx, fy = f["x"], f["y"]
                for i in range(args.rows):
                    yield fx[i], fy[i]

        def batches():
            with h5py.File(path, "r") as f:
                for i in range(0, args.rows, 256):
                    yield f["x"][i:i + 256], f["y"][i:i + 256]

        batch_spec = tuple(tf.TensorSpec([None, *s.shape], s.dtype) for s in spec)
        cases = {
            "tfmpi.data.hdf5": tfmpi.data.hdf5(path, ["x", "y"]).batch(256),
            "h5py rows, from_generator": tf.data.Dataset.from_generator(
                rows, output_signature=spec).batch(256),
            "h5py batches, from_generator": tf.data.Dataset.from_generator(
                batches, output_signature=batch_spec),
            "from_tensor_slices (in memory)": tf.data.Dataset.from_tensor_slices((x, y)).batch(256),
        }
        rates = {name: timed(ds) for name, ds in cases.items()}
    base = rates["h5py rows, from_generator"]
    print(f"{args.rows} rows of {args.width} float32 + an int64 label, batches of 256")
    print("| reader | rows/s | vs h5py rows + from_generator |")
    print("|---|---|---|")
    for name, r in rates.items():
        print(f"| {name} | {r:,.0f} | {r / base:.1f}x |")


if __name__ == "__main__":
    main()
