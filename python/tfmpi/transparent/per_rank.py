"""Per-rank batch mode (TFMPI_BATCH_MODE=per-rank): each rank trains on whole
batches of its own, global batch N*B.

model.fit's training batches are dealt round-robin: rank i takes batches
i, i+N, i+2N, ... of the batches the script's data produces, and every rank
runs the same number of steps (the last num_batches % N batches of an epoch
are dropped), so no rank waits for data another rank never has. Evaluation and
prediction split each batch as in global-batch mode (steps.py; metrics stay
exact), and a pipeline input_sharding.py can rewrite is sharded by elements there.
Custom loops that iterate a batched tf.data dataset eagerly get the same
round-robin deal (deal_batches). A pipeline input_sharding.py can rewrite
decodes only the batches the rank is dealt. Gradients are averaged with equal weights.
"""

from tfmpi.transparent import input_sharding, loops, state, versions


UNKNOWN_EPOCH = (
    "tfmpi: per-rank batch mode needs to know how many batches an epoch has, so that every "
    "rank runs the same number of steps: pass steps_per_epoch to fit, or use data of known "
    "size (numpy arrays, a dataset with known cardinality)")


def deal(dataset, batches):
    """Rank i's batches i, i+N, ... of `dataset`, and how many that is per rank.

    With `batches` known, the last batches % N are dropped, so every rank runs
    the same number of steps; with None (an endless dataset) every rank draws
    from its shard for as long as the caller runs.
    """
    if batches is None:
        return dataset.shard(state.size, state.rank), None
    per_rank = batches // state.size
    if per_rank == 0:
        raise ValueError(f"tfmpi: per-rank batch mode: {batches} batches per epoch can't be "
                         f"dealt to {state.size} ranks")
    return dataset.take(per_rank * state.size).shard(state.size, state.rank), per_rank


def deal_batches(dataset):
    """deal() for a dataset a custom loop iterates: its length must be known
    (or infinite)."""
    import tensorflow as tf

    n = int(dataset.cardinality())
    if n == tf.data.UNKNOWN_CARDINALITY:
        raise ValueError(
            "tfmpi: per-rank batch mode: a custom loop iterates a dataset of unknown length, so "
            "ranks could run different numbers of steps. Give it a known length (e.g. "
            "dataset.apply(tf.data.experimental.assert_cardinality(n))), or use the default "
            "global batch mode")
    batches = None if n == tf.data.INFINITE_CARDINALITY else n
    plan = input_sharding.plan_for(dataset)
    if plan is not None:  # Note [Sharded input]: only the dealt batches are decoded
        return input_sharding.rewrite_dealt(plan, batches)[0]
    return deal(dataset, batches)[0]


def install():
    if state.options.batch_mode != "per-rank" or state.size == 1:
        return
    from keras.src.backend.tensorflow.trainer import TFEpochIterator

    original_init = TFEpochIterator.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not loops.claim_training_iterator():
            return
        versions.require_instance(self, ("data_adapter", "_num_batches", "_distributed_dataset"),
                                  "TFEpochIterator")
        batches = self.data_adapter.num_batches
        if batches is None and not self.steps_per_epoch:
            raise ValueError(UNKNOWN_EPOCH)
        dataset = self.data_adapter.get_tf_dataset()
        plan = input_sharding.plan_for_adapter(self.data_adapter)
        if plan is None:
            dataset, per_rank = deal(dataset, batches)
        else:  # Note [Sharded input]: only the dealt batches are decoded
            dataset, per_rank = input_sharding.rewrite_dealt(plan, batches)
        self._tfmpi_dealt = True
        if per_rank is not None:
            self._tfmpi_num_batches = per_rank
            self._num_batches = per_rank
        self._distributed_dataset = dataset

    original_reset = TFEpochIterator.reset

    def reset(self):
        original_reset(self)
        if getattr(self, "_tfmpi_num_batches", None) is not None:
            self._num_batches = self._tfmpi_num_batches

    TFEpochIterator.__init__ = __init__
    TFEpochIterator.reset = reset
