"""One random seed for all ranks, so that shuffles and initial weights agree
even when the script sets no seed. A seed the script sets itself later wins,
and is the same on every rank anyway."""

import random

import numpy as np

import tfmpi
from tfmpi.transparent import state


def agree_on_seed(options):
    seed = options.seed
    if seed is None:  # not launched by tfmpirun: rank 0 draws one
        mine = np.array([random.SystemRandom().randrange(2**31)], np.int64)
        seed = int(tfmpi.broadcast(mine, root=0, name="tfmpi/seed")[0])
    state.seed = seed
    random.seed(seed)
    np.random.seed(seed)


def seed_tensorflow():
    import tensorflow as tf

    tf.random.set_seed(state.seed)


def seed_keras():
    import keras

    keras.utils.set_random_seed(state.seed)


def seed_tf_keras():
    import tf_keras

    tf_keras.utils.set_random_seed(state.seed)
