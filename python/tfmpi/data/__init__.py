"""Row readers for data files as tf.data sources (C++ readers in src/tfmpi/data).

    import tfmpi.data
    ds = tfmpi.data.npy("x.npy", shuffle=True, seed=1).batch(32)
    ds = tfmpi.data.csv("t.csv", columns=["x", "y"], dtypes=[tf.float32, tf.int64])
    ds = tfmpi.data.hdf5("d.h5", datasets=["images", "labels"])
    ds = tfmpi.data.netcdf("d.nc", variables=["temperature"])

Elements are rows: a tensor for one column (a `str` column or dataset name), a
tuple for a list of them. Rows come in file order, or with shuffle=True in a
permutation drawn anew each epoch, the same in every process for the same seed.
See docs/data.md.
"""

from tfmpi.data.readers import bytes_read, csv, hdf5, netcdf, npy  # noqa: F401

__all__ = ["npy", "csv", "hdf5", "netcdf", "bytes_read"]
