"""Transparent mode for tf_keras, the Keras 2 line that TensorFlow serves as
tf.keras when TF_USE_LEGACY_KERAS=1.

The math is the same as for Keras 3 (see the Notes in ../optimizer_patches.py,
../batching.py, ../metrics_patches.py, ../batchnorm.py); only the points where
it hooks in differ: tf_keras optimizers reduce in apply_gradients, its trainer
looks model.train_step up when it traces, and its metrics have no
stateless_result, so their state is swapped for the global sum while the
result is read.
"""


def install():
    """Called once, by the import hook for tf_keras."""
    import tf_keras

    from tfmpi.transparent import adapt, losses, randomness, seeds, verify, versions
    from tfmpi.transparent.legacy_keras import (batchnorm, metrics, optimizers, side_effects,
                                                training)

    versions.check("tf_keras")
    seeds.seed_tf_keras()
    optimizers.install()
    training.install()
    metrics.install()
    losses.install_tf_keras()
    side_effects.install()
    batchnorm.install()
    randomness.install_tf_keras()
    adapt.install(tf_keras.layers, tf_keras.layers.experimental.preprocessing, tf_keras.utils)
    verify.install_tf_keras()
