"""tf.data file caches, one per rank.

Note [Cache files per rank]
`dataset.cache(filename)` writes the elements that pass through it to
`filename.index` and `filename.data-*` during the first complete pass, and
reads them from there in later passes and later runs. The file is the cache's
identity: TensorFlow takes a lock file beside it while it writes, and an
iterator that finds the lock taken fails ("There appears to be a concurrent
caching iterator running"). Under tfmpirun every rank runs the script's
pipeline, so the ranks of one host (or of hosts that share a filesystem) all
write the same cache at once, and every rank but the first to start fails in
its first epoch. So with more than one rank each rank caches to its own files:
`filename.tfmpi-rank<r>-of-<N>`. That is also right where the ranks' caches
hold different elements: with `--data-sharding files` a cache after the file
reader holds the rank's files only (the name carries the rank and the number
of ranks, so a run with another N or another rank does not read it back).
Element-level sharding (Note [Sharded input]) cuts the rows after the part of
the pipeline a cache can sit in, so there every rank's cache holds what the
1-process cache holds. An empty filename (the in-memory cache) is left alone,
as is a single rank. A filename given as a string tensor gets the suffix in
the graph, where it is not empty. Rank 0 says once which files it writes.
"""

import os
import sys

from tfmpi.transparent import state

_said = []


def suffix():
    return f".tfmpi-rank{state.rank}-of-{state.size}"


def rank_filename(filename):
    """`filename` for this rank: the suffixed name, unless it is empty (the
    in-memory cache) or already this rank's."""
    import tensorflow as tf

    if isinstance(filename, os.PathLike):
        filename = os.fspath(filename)
    if isinstance(filename, bytes):
        filename = filename.decode()
    if isinstance(filename, str):
        if not filename or filename.endswith(suffix()):
            return filename
        _say(filename)
        return filename + suffix()
    if tf.is_tensor(filename) and filename.dtype == tf.string:
        name = tf.convert_to_tensor(filename)
        return tf.where(tf.strings.length(name) > 0, tf.strings.join([name, suffix()]), name)
    return filename


def _say(filename):
    if _said or state.rank != 0:
        return
    _said.append(filename)
    print(f"tfmpi: note: Dataset.cache({filename!r}) caches to one file per rank "
          f"({filename}.tfmpi-rank0-of-{state.size} ... "
          f"{filename}.tfmpi-rank{state.size - 1}-of-{state.size}): ranks that share a "
          "filesystem cannot write one cache together (docs/transparent.md, Saving and "
          "loading).", file=sys.stderr)


def install_tensorflow():
    if state.size == 1:
        return
    from tensorflow.python.data.ops import cache_op

    original = cache_op.CacheDataset.__init__
    if getattr(original, "_tfmpi_wrapped", False):
        return

    def __init__(self, input_dataset, filename, name=None):
        original(self, input_dataset, rank_filename(filename), name=name)

    __init__._tfmpi_wrapped = True
    cache_op.CacheDataset.__init__ = __init__
