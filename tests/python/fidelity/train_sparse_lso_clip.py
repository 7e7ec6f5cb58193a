"""Embedding (sparse IndexedSlices gradients), LossScaleOptimizer and
global_clipnorm in one model.fit run; with "adam", plain Adam instead, whose
update squares the rows of a sparse gradient before repeated indices are added
up (a reducer that densified the IndexedSlices would differ from step 2).
Usage: train_sparse_lso_clip.py OUT_DIR [adam]"""

import sys

import numpy as np

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(11)
rng = np.random.default_rng(0)
tokens = rng.integers(0, 500, size=(1000, 12)).astype("int32")
labels = (tokens[:, 0] % 3).astype("int32")

model = keras.Sequential([
    keras.Input(shape=(12,), dtype="int32"),
    keras.layers.Embedding(500, 16),
    keras.layers.GlobalAveragePooling1D(),
    keras.layers.Dense(3, activation="softmax"),
])
if len(sys.argv) > 2 and sys.argv[2] == "adam":
    optimizer, epochs = common.optimizer(keras.optimizers.Adam(5e-3)), 2
else:
    inner = keras.optimizers.SGD(0.5, global_clipnorm=1.0)
    optimizer, epochs = keras.mixed_precision.LossScaleOptimizer(inner), 3
model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")

record = common.RecordLoss(common.batch_sizes(1000, 30))
model.fit(tokens, labels, batch_size=30, epochs=epochs, verbose=0, callbacks=[record])  # 34 steps/epoch
common.write_run(record.losses, model, record.bounds)
