"""TensorFlow-level patches: the version gate (versions.py), the refusal of
tf.distribute strategies, the shared seed, the slicing of custom training
loops (custom_loops.py), compute_average_loss (losses.py), checkpoints
(side_effects.py), random ops (randomness.py) and tf.data file caches
(dataset_cache.py)."""

from tfmpi.transparent import versions

# Strategies that replicate work across devices or workers would double-count
# with tfmpi's own data parallelism.
_ALLOWED_STRATEGIES = {"_DefaultDistributionStrategy", "_DefaultDistributionStrategyV1",
                       "OneDeviceStrategy", "OneDeviceStrategyV1"}


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


def install(tf):
    versions.check("tensorflow")  # first: the modules below need a working TensorFlow
    from tfmpi.transparent import (custom_loops, dataset_cache, gradient_tape, losses, randomness,
                                   seeds, side_effects, verify)

    seeds.seed_tensorflow()
    _forbid_strategies()
    custom_loops.install()
    losses.install_tensorflow(tf)
    side_effects.install_checkpoint(tf)
    side_effects.install_saved_model()
    side_effects.install_summaries()
    randomness.install_tensorflow(tf)
    gradient_tape.install_tensorflow(tf)
    verify.install_tensorflow()  # last: its wrappers see what the script sees
    dataset_cache.install_tensorflow()
