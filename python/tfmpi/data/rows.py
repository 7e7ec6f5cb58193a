"""The pipeline shared by every format: row indices -> chunks -> read op -> rows.

Note [The _tfmpi_rows hook]
Every dataset tfmpi.data returns carries `_tfmpi_rows`, a `Rows`: the file's
row count, the dataset of row indices in the order the rows come out
(`index_dataset`, shuffled or not), `read(indices)`, the rows at a vector of
indices in one op call, and `from_indices(index_dataset)`, which reads the
rows of any dataset of int64 scalar indices with the same element structure.
Sharded input (python/tfmpi/transparent/input_sharding.py) batches
`index_dataset`, takes a rank's slice of each batch and reads only those rows
with `read`. Shuffled, every
iterator over `index_dataset` (through any pipeline built on it) draws the
next permutation in the seed's sequence, so one process should build one
pipeline per epoch from it, as the returned dataset does. It is internal: not
part of the public API, but its contract is kept.
"""

import tensorflow as tf

from tfmpi.tensorflow.ops import _lib

# Chunks of about this many bytes of decoded rows per read op call.
_CHUNK_BYTES = 1 << 20
_MAX_CHUNK_ROWS = 8192


class Rows:
    """How to read one file's rows; see Note [The _tfmpi_rows hook]."""

    def __init__(self, attrs, dtypes, row_shapes, num_rows, structure, chunk_rows, index_dataset):
        self._attrs = attrs
        self._dtypes = list(dtypes)
        self._row_shapes = list(row_shapes)
        self.num_rows = int(num_rows)
        self._structure = structure  # "single" or "tuple"
        self.chunk_rows = int(chunk_rows)
        self.index_dataset = index_dataset

    def read(self, indices):
        """The rows at `indices` (an int64 vector), batched, in one read op call."""
        columns = _lib.tfmpi_read_rows(tf.cast(indices, tf.int64), dtypes=self._dtypes,
                                       row_shapes=self._row_shapes, **self._attrs)
        return columns[0] if self._structure == "single" else tuple(columns)

    def from_indices(self, index_dataset):
        """The rows at the indices `index_dataset` yields, in its order."""
        return (index_dataset.batch(self.chunk_rows)
                .map(self.read, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                .unbatch())

    def dataset(self):
        """The rows of `index_dataset`, with this object attached as `_tfmpi_rows`.

        unbatch() loses the cardinality, which Keras uses to size an epoch; the
        index dataset has exactly num_rows elements, so it is asserted back.
        """
        ds = self.from_indices(self.index_dataset)
        ds = ds.apply(tf.data.experimental.assert_cardinality(self.num_rows))
        ds._tfmpi_rows = self
        return ds


def default_chunk_rows(row_bytes):
    """Rows per read: about 1 MiB of rows, at least 1."""
    return max(1, min(_MAX_CHUNK_ROWS, _CHUNK_BYTES // max(1, int(row_bytes))))


def index_dataset(num_rows, shuffle, seed):
    """Row indices 0..num_rows-1 (int64), in order or shuffled each epoch.

    Note [Shuffle seeds]
    The order must be the same in every process that uses the same seed, so
    the seed passed to shuffle is explicit: `seed`, or else TensorFlow's global
    seed (tf.random.set_seed). With neither, each process draws its own order.
    The buffer holds every index, so each epoch is a uniform permutation, and
    reshuffle_each_iteration draws the next epoch's from a sequence that
    depends only on the seed.
    """
    ds = tf.data.Dataset.range(num_rows)
    if not shuffle:
        return ds
    if seed is None:
        seed = tf.compat.v1.random.get_seed(None)[0]
    return ds.shuffle(max(1, num_rows), seed=seed, reshuffle_each_iteration=True)
