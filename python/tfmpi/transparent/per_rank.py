"""Per-rank batch mode (TFMPI_BATCH_MODE=per-rank): each rank trains on whole
batches of its own, global batch N*B; with adaptive work shares (the default),
fit deals a step's N batches by speed instead (Note [Batches by shares],
below).

With TFMPI_SHARES=equal, model.fit's training batches are dealt round-robin:
rank i takes batches i, i+N, i+2N, ... of the batches the script's data
produces, and every rank runs the same number of steps (the last num_batches %
N batches of an epoch are dropped), so no rank waits for data another rank
never has. Evaluation and prediction split each batch as in global-batch mode
(steps.py; metrics stay exact), and a pipeline input_sharding.py can rewrite
is sharded by elements there. Custom loops that iterate a batched tf.data
dataset eagerly get the same round-robin deal (deal_batches). A pipeline
input_sharding.py can rewrite decodes only the batches the rank is dealt.
Gradients are averaged with equal weights.

Note [Batches by shares]
With adaptive work shares (TFMPI_SHARES, the default), fit's training steps
deal by speed instead, as LB-BSP does: the N batches a step's ranks would be
dealt (i, i+1, ..., i+N-1 of the script's data) are put together, and rank r
trains on its share of those N*B samples (shares.py), so a slow rank gets
fewer. Gradients are weighted by slice size, s_r / (N*B). Each rank's loss is
the mean over its slice, so sum_r (s_r / (N*B)) g_r is the gradient of the
mean over the N*B samples: with equal batches it is (1/N) sum_r g_r of the
mean over each B, the same number (where a step's batches are all of B: a step
holding a short last batch is the mean over its samples, as one process with
batches of N*B computes it, not the mean of the batches' means). A loss with
reduction "sum" is scaled by B / s_r on the slice (1 / (N w_r), not N*B / s_r
as in global-batch mode), giving (1/N) sum_r of the per-batch sums, as with
equal batches.

The train function is fit's and train_on_batch's alike, but train_on_batch is
not dealt: each rank holds a batch of its own. So the step reads
state.batches_per_step, N while fit's training iterator holds the ranks'
batches put together (it sets it) and 1 from the start of a train_on_batch
(steps.mark_loops); at 1 the rank keeps its whole batch, weighted 1/N,
unchecked, as with equal batches. Evaluation steps do not read it.

The samples of each step are the same as with equal batches, and with equal
shares rank r holds exactly batch i+r. What changes once shares differ: which
rank computes which sample (each rank's randomness draws for its own rows, as
before); per-slice statistics such as BatchNormalization's moments, over s_r
rows instead of B; and a loss a script's train_step computes by hand that is
not a mean over the rows (a reduce_sum), which follows the slice sizes, as in
global-batch mode. Custom loops keep equal batches. fit's training batches are
checked for agreement (batch_check.py): every rank must read the same data.
"""

from tfmpi.transparent import batching, input_sharding, loops, state, versions


UNKNOWN_EPOCH = (
    "tfmpi: per-rank batch mode needs to know how many batches an epoch has, so that every "
    "rank runs the same number of steps: pass steps_per_epoch to fit, or use data of known "
    "size (numpy arrays, a dataset with known cardinality)")


def steps_per_epoch(batches):
    """The steps of an epoch of `batches` batches, N per step (the last batches % N dropped)."""
    steps = batches // state.size
    if steps == 0:
        raise ValueError(f"tfmpi: per-rank batch mode: {batches} batches per epoch can't be "
                         f"dealt to {state.size} ranks")
    return steps


def _whole_steps(dataset, batches, epochs):
    """The first (batches // N) * N batches of each of the `epochs` epochs of
    `dataset` (which holds them one after another), and batches // N."""
    steps = steps_per_epoch(batches)
    keep = steps * state.size
    if epochs == 1:
        return dataset.take(keep), steps
    return dataset.enumerate().filter(lambda i, e: i % batches < keep).map(lambda i, e: e), steps


def deal(dataset, batches, epochs=1):
    """Rank i's batches i, i+N, ... of `dataset`, and how many that is per rank.

    With `batches` known, the last batches % N of an epoch are dropped, so
    every rank runs the same number of steps (`epochs`: how many epochs the
    dataset holds one after another, as tf_keras makes one of arrays); with
    None (an endless dataset) every rank draws from its shard for as long as
    the caller runs.
    """
    if batches is None:
        return dataset.shard(state.size, state.rank), None
    dataset, steps = _whole_steps(dataset, batches, epochs)
    return dataset.shard(state.size, state.rank), steps


def by_shares():
    """True where fit's training steps deal by work shares (Note [Batches by shares])."""
    return (state.size > 1 and state.options.batch_mode == "per-rank"
            and state.options.shares == "adaptive")


def _merged(t):
    """A ragged-batched component [N, (B), ...] as the N batches end to end."""
    import tensorflow as tf

    if isinstance(t, tf.RaggedTensor):
        return t.merge_dims(0, 1)
    return tf.reshape(t, tf.concat([[-1], tf.shape(t)[2:]], 0))


def group(dataset, batches, epochs=1):
    """The batches of `dataset` N at a time, put end to end (Note [Batches by
    shares]): step k's batch is batches kN ... kN+N-1; and how many steps that
    is. As deal(): with `batches` known, the last batches % N of an epoch are
    dropped."""
    import tensorflow as tf

    steps = None
    if batches is not None:
        dataset, steps = _whole_steps(dataset, batches, epochs)
    kinds = {type(spec).__name__ for spec in tf.nest.flatten(dataset.element_spec)}
    if not kinds <= {"TensorSpec", "RaggedTensorSpec"}:
        raise ValueError(
            "tfmpi: per-rank batch mode deals fit's batches by speed (TFMPI_SHARES=adaptive) by "
            "putting a step's batches together, which needs dense or ragged tensors; this data "
            f"holds {', '.join(sorted(kinds - {'TensorSpec', 'RaggedTensorSpec'}))}. Set "
            "TFMPI_SHARES=equal to deal whole batches instead")
    grouped = dataset.ragged_batch(state.size, drop_remainder=True)
    spec = grouped.element_spec

    def merge(*element):
        return tf.nest.pack_sequence_as(spec, [_merged(t) for t in tf.nest.flatten(element)])

    return grouped.map(merge), steps


def fit_batches(dataset, plan, batches, epochs=1):
    """fit's training data for this rank, and its steps per epoch (None:
    endless): dealt by speed (Note [Batches by shares]) or round-robin; of a
    pipeline with an input_sharding `plan`, only this rank's rows or batches
    are decoded (Note [Sharded input]). `epochs`: as for deal()."""
    if by_shares():
        batching.set_batches_per_step(state.size)
        if plan is not None:
            return input_sharding.rewrite_grouped(plan, batches)
        return group(dataset, batches, epochs)
    if plan is not None:
        return input_sharding.rewrite_dealt(plan, batches)
    return deal(dataset, batches, epochs)


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
        dataset, per_rank = fit_batches(dataset, plan, batches)
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
