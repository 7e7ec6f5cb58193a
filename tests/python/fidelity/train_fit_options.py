"""model.fit on a repeating tf.data dataset with steps_per_epoch (epochs cut
across passes) and per-sample weights, then evaluate with sample weights.
Usage: train_fit_options.py OUT_DIR"""

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(7)
x, y = common.digits()
weights = (1.0 + (y % 3)).astype("float32")
train = (tf.data.Dataset.from_tensor_slices((x[:1400], y[:1400], weights[:1400]))
         .shuffle(1400, seed=1).batch(40).repeat())  # 35 batches per pass

model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=common.optimizer(keras.optimizers.Adam(5e-3)),
              loss="sparse_categorical_crossentropy", weighted_metrics=["accuracy"])
record = common.RecordLoss([40])
model.fit(train, steps_per_epoch=30, epochs=4, verbose=0, callbacks=[record])  # 120 steps
common.evaluate(model, x[1400:], y[1400:], sample_weight=weights[1400:], batch_size=64)
common.write_run(record.losses, model, record.bounds)
