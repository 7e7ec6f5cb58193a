"""predict of 53 rows in batches of 16 (a ragged last batch); the result in
predict-<rank>.npy in the folder argv[1]."""

import os
import sys

import numpy as np

from small_data import keras, rank

keras.utils.set_random_seed(2)
x = np.random.default_rng(1).random((53, 6)).astype("float32")
model = keras.Sequential([keras.Input(shape=(6,)), keras.layers.Dense(3)])
np.save(os.path.join(sys.argv[1], f"predict-{rank}.npy"), model.predict(x, batch_size=16, verbose=0))
