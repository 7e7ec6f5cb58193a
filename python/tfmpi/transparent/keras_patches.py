"""Applies every Keras patch of transparent mode, once Keras is imported (the
import hook calls install() once)."""

from tfmpi.transparent import seeds


def install():
    from tfmpi.transparent import (batchnorm, metrics_patches, optimizer_patches, per_rank,
                                   side_effects, trainer_patches)

    seeds.seed_keras()
    optimizer_patches.install()
    trainer_patches.install()
    metrics_patches.install()
    side_effects.install()
    batchnorm.install()
    per_rank.install()
