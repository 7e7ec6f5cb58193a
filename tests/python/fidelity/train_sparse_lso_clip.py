"""Embedding (sparse IndexedSlices gradients), LossScaleOptimizer and
global_clipnorm in one model.fit run. Usage: train_sparse_lso_clip.py OUT_DIR"""

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
inner = keras.optimizers.SGD(0.5, global_clipnorm=1.0)
model.compile(optimizer=keras.mixed_precision.LossScaleOptimizer(inner),
              loss="sparse_categorical_crossentropy")


record = common.RecordLoss()
model.fit(tokens, labels, batch_size=30, epochs=3, verbose=0, callbacks=[record])  # 34 steps/epoch
common.write_run(record.losses, model)
