"""The public readers: tfmpi.data.npy, csv, hdf5, netcdf, and bytes_read."""

import os

import numpy as np
import tensorflow as tf

from tfmpi.data.rows import Rows, default_chunk_rows, index_dataset
from tfmpi.tensorflow.ops import _lib


def _describe(attrs, csv_types=()):
    """(num_rows, names, dtypes, row shapes) of a file, read eagerly by the C++ reader."""
    with tf.init_scope():
        rows, names, types, shapes = _lib.tfmpi_describe_rows(csv_types=list(csv_types), **attrs)
    names = [n.decode() for n in names.numpy()]
    dtypes = [tf.as_dtype(t.decode()) for t in types.numpy()]
    row_shapes = [tf.TensorShape([int(d) for d in s.decode().split(",") if d]) for s in shapes.numpy()]
    return int(rows.numpy()), names, dtypes, row_shapes


def _names(names, what):
    """(list of names, structure): a str gives one column as a tensor, a list a tuple."""
    if names is None:
        return [], None
    if isinstance(names, (str, int)):
        return [str(names)], "single"
    names = [str(n) for n in names]
    if not names:
        raise ValueError(f"tfmpi.data: the list of {what} is empty")
    return names, "tuple"


def _build(attrs, shuffle, seed, chunk_rows, structure, csv_types=()):
    num_rows, names, dtypes, row_shapes = _describe(attrs, csv_types)
    if not dtypes:
        raise ValueError(f"{attrs['path']}: no columns to read")
    if structure is None:
        structure = "single" if len(dtypes) == 1 else "tuple"
    if chunk_rows is None:
        row_bytes = sum(d.size * max(1, s.num_elements()) for d, s in zip(dtypes, row_shapes))
        chunk_rows = default_chunk_rows(row_bytes)
    if int(chunk_rows) < 1:
        raise ValueError(f"tfmpi.data: chunk_rows must be at least 1, got {chunk_rows}")
    rows = Rows(attrs, dtypes, row_shapes, num_rows, structure, chunk_rows,
                index_dataset(num_rows, shuffle, seed))
    return rows.dataset()


def npy(path, shuffle=False, seed=None, chunk_rows=None):
    """Rows (along the first axis) of a C-ordered .npy array of a numeric dtype.

    Each element is one row, a tensor of the array's dtype and shape[1:].
    """
    attrs = dict(format="npy", path=os.fspath(path))
    return _build(attrs, shuffle, seed, chunk_rows, "single")


def csv(path, columns=None, dtypes=None, header=True, delimiter=",", shuffle=False, seed=None,
        chunk_rows=None):
    """Typed columns of a CSV file (RFC 4180 quoting, CRLF or LF line ends).

    columns: a header name or 0-based position (a scalar per element), a list
      of them (a tuple per element), or None for every column.
    dtypes: one dtype for all columns, one per column, or a dict by column
      name; float32 where not given. Numeric and bool dtypes only.
    """
    names, structure = _names(columns, "columns")
    attrs = dict(format="csv", path=os.fspath(path), names=names, csv_header=bool(header),
                 csv_delimiter=delimiter)
    if dtypes is None:
        types = []
    elif isinstance(dtypes, dict):
        read = _describe(attrs)[1]  # the header names of the columns read
        unknown = sorted(set(map(str, dtypes)) - set(read))
        if unknown:
            raise ValueError(f"{path}: dtypes for columns that are not read: {unknown} "
                             f"(the columns read are: {read})")
        by_name = {str(k): tf.as_dtype(v) for k, v in dtypes.items()}
        types = [by_name.get(n, tf.float32) for n in read]
    elif isinstance(dtypes, (list, tuple)):
        types = [tf.as_dtype(d) for d in dtypes]
    else:
        types = [tf.as_dtype(dtypes)]
    return _build(attrs, shuffle, seed, chunk_rows, structure, csv_types=types)


def hdf5(path, datasets, shuffle=False, seed=None, chunk_rows=None):
    """Rows along the first axis of HDF5 datasets of equal length.

    datasets: a dataset path in the file ("x", "group/y"; a tensor per element)
      or a list of them (a tuple per element).
    """
    names, structure = _names(datasets, "datasets")
    if not names:
        raise ValueError(f"{path}: tfmpi.data.hdf5 needs datasets=[...], the datasets to read")
    attrs = dict(format="hdf5", path=os.fspath(path), names=names)
    return _build(attrs, shuffle, seed, chunk_rows, structure)


def netcdf(path, variables, shuffle=False, seed=None, chunk_rows=None):
    """Rows along the first (record) dimension of NetCDF variables of equal length.

    variables: a variable name ("t", or "group/t" in a NetCDF-4 group; a tensor
      per element) or a list of them (a tuple per element). NetCDF-4 and
      classic files; numeric variables only.
    """
    names, structure = _names(variables, "variables")
    if not names:
        raise ValueError(f"{path}: tfmpi.data.netcdf needs variables=[...], the variables to read")
    attrs = dict(format="netcdf", path=os.fspath(path), names=names)
    return _build(attrs, shuffle, seed, chunk_rows, structure)


def bytes_read():
    """Bytes this process has read from data files through tfmpi.data readers."""
    with tf.init_scope():
        return int(np.asarray(_lib.tfmpi_bytes_read()))
