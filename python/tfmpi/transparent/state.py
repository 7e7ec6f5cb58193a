"""Process-wide state of transparent mode."""


def variable(attr, make):
    """The tf.Variable held in <attr> below, made by make() on first use,
    outside any function being traced. Not at import: creating a variable
    initialises TensorFlow's runtime before the script can configure threads
    or devices."""
    if globals()[attr] is None:
        import tensorflow as tf

        with tf.init_scope():
            globals()[attr] = make()
    return globals()[attr]


active = False
rank = 0
size = 1
options = None
seed = None

# tf.Variable: this rank's share s_i / B of the current global batch (see
# batching.py). Created when TensorFlow is imported.
batch_weight = None

# tf.Variable: B / s_i while the batch is split, else 1 (losses with reduction
# "sum", batching.py).
sum_scale = None

# tf.Variable float32: how many ranks' batches fit's current batch holds (N in
# per-rank mode dealing by shares, else 1; per_rank.py, Note [Batches by shares]).
batches_per_step = None

# tf.Variable int64 [start, size, total, replicated]: the split a custom loop
# made last (total 0: not split; replicated 1: every rank holds the whole
# batch; batching.py, Note [Split context], Note [Batches smaller than the ranks]).
split = None

# A custom loop's dataset iteration has been split at least once: from then
# on, random draws in traced functions look at state.split (randomness.py).
custom_split_seen = False

# tf.Variable float64 [N + 1]: the cuts of the work shares (shares.py, Note [Live shares]).
share_cuts = None

# tf.Variable float64: the samples this rank computed since the last rebalance.
samples_done = None
