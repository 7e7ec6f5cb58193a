"""model.fit fidelity run of a small CNN on digits upsampled to 32x32: enough
compute per sample that a rank's speed can be measured, so the work shares
(Note [Live shares]) move when the ranks differ. In float64: 60 float32 steps of
a CNN amplify the rounding of a different summation order past the fidelity
tolerance on their own (docs/transparent.md, "Why two runs can drift apart"),
and this run is about the split, not about rounding. Usage: train_cnn.py OUT_DIR [BATCH]
(BATCH: 96 by default; one process with 192 is what 2 ranks of per-rank batches
of 96 compute)."""

import sys

import common
from common import keras

import tensorflow as tf

common.setup_determinism()
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
keras.config.set_floatx("float64")
keras.utils.set_random_seed(5)
x, y = common.digits()
x = tf.image.resize(x.reshape(-1, 8, 8, 1).astype("float64"), (32, 32)).numpy()

model = keras.Sequential([
    keras.Input(shape=(32, 32, 1)),
    keras.layers.Conv2D(24, 3, activation="relu"),
    keras.layers.Conv2D(24, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Flatten(),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.5),
              loss="sparse_categorical_crossentropy")

# 960 samples / batch 96: 10 steps per epoch, 40 steps in all.
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 96
record = common.RecordLoss(common.batch_sizes(960, batch))
model.fit(x[:960], y[:960], batch_size=batch, epochs=4, shuffle=True, verbose=0,
          callbacks=[record])
common.evaluate(model, x[1437:], y[1437:])
common.write_run(record.losses, model, record.bounds)
