"""Applies every Keras patch of transparent mode, once Keras is imported (the
import hook calls install() once)."""

from tfmpi.transparent import seeds, state, versions


def install():
    import keras

    from tfmpi.transparent import (adapt, batchnorm, fused_updates, input_sharding, losses,
                                   metrics_patches, optimizer_patches, per_rank, randomness,
                                   sharded_update, side_effects, trainer_patches, verify)

    versions.check("keras")
    seeds.seed_keras()
    optimizer_patches.install()
    sharded_update.install()
    trainer_patches.install()
    metrics_patches.install()
    losses.install_keras()
    side_effects.install()
    batchnorm.install()
    per_rank.install()
    input_sharding.install()
    randomness.install_keras()
    adapt.install(keras.layers, keras.utils)
    if state.options.fused_updates:
        fused_updates.install()
    verify.install_keras()
