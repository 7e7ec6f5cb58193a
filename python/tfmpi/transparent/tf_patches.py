"""TensorFlow-level patches: version and tf.distribute checks, the shared seed,
and, for custom training loops that iterate a batched tf.data dataset, batch
slicing (global batch mode) or dealing whole batches (per-rank mode)."""

import sys

from tfmpi.transparent import batching, loops, seeds, state

MIN_TF = (2, 16)

_BATCHING = {"_BatchDataset", "_PaddedBatchDataset", "_ParallelBatchDataset",
             "_DenseToRaggedDataset", "_DenseToSparseBatchDataset", "_RebatchDataset",
             "_GroupByWindowDataset", "_MapAndBatchDataset"}
_UNBATCHING = {"_UnbatchDataset"}
# Strategies that replicate work across devices or workers would double-count
# with tfmpi's own data parallelism.
_ALLOWED_STRATEGIES = {"_DefaultDistributionStrategy", "_DefaultDistributionStrategyV1",
                       "OneDeviceStrategy", "OneDeviceStrategyV1"}


def _check_version(tf):
    try:
        version = tuple(int(p) for p in tf.__version__.split(".")[:2])
    except ValueError:
        return
    if version < MIN_TF:
        sys.stderr.write(f"tfmpi: TensorFlow {tf.__version__} is not supported by transparent mode; "
                         f"it needs TensorFlow >= {MIN_TF[0]}.{MIN_TF[1]} (Keras 3).\n")
        raise SystemExit(2)


def _forbid_strategies():
    from tensorflow.python.distribute import distribute_lib

    original = distribute_lib.StrategyBase.__init__

    def __init__(self, *args, **kwargs):
        name = type(self).__name__
        if name not in _ALLOWED_STRATEGIES:
            raise RuntimeError(
                f"tfmpi: this script creates a tf.distribute.{name}. Under tfmpirun, tfmpi already "
                "trains data-parallel across the MPI ranks; a strategy on top would double-count "
                "gradients. Remove the strategy (train as on one process), or run the script "
                "without tfmpirun.")
        original(self, *args, **kwargs)

    distribute_lib.StrategyBase.__init__ = __init__


def is_batched(dataset):
    """Whether the dataset's elements are batches (a batch op nearer than any unbatch)."""
    d = dataset
    while d is not None:
        name = type(d).__name__
        if name in _BATCHING:
            return True
        if name in _UNBATCHING:
            return False
        try:
            inputs = d._inputs()
        except Exception:
            return False
        d = inputs[0] if len(inputs) == 1 else None
    return False


class _SlicingIterator:
    """Yields this rank's slice of each batch and records its weight s_i / B."""

    def __init__(self, inner):
        self._inner = inner

    def __iter__(self):
        return self

    def __next__(self):
        element = next(self._inner)
        local, weight = batching.slice_batch(element)
        if weight is not None:
            batching.record_share(weight)
        return local

    def get_next(self):
        return self.__next__()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _slice_custom_loop_iteration(tf):
    from tensorflow.python.data.ops import dataset_ops

    original_iter = dataset_ops.DatasetV2.__iter__

    def __iter__(self):
        if (state.size == 1 or loops.inside_keras_loop() or not tf.executing_eagerly()
                or not is_batched(self)):
            return original_iter(self)
        if state.options.batch_mode == "global":
            return _SlicingIterator(original_iter(self))
        from tfmpi.transparent import per_rank

        return original_iter(per_rank.deal_batches(self))

    dataset_ops.DatasetV2.__iter__ = __iter__


def install(tf):
    _check_version(tf)
    seeds.seed_tensorflow()
    _forbid_strategies()
    _slice_custom_loop_iteration(tf)
