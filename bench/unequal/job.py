"""The training job of the unequal-hosts benchmark: an ordinary Keras CNN
(digits upsampled to 32x32), fixed steps, one thread per rank. Run under
tfmpirun unchanged. Rank 0 writes each step's end time to OUT_JSON and the
last finished step to OUT_JSON.progress (the driver watches it to change a
host half-way). Usage: job.py OUT_JSON STEPS BATCH"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf
import keras
from sklearn.datasets import load_digits

out, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
keras.utils.set_random_seed(1)

digits = load_digits()
x = tf.image.resize(digits.images.reshape(-1, 8, 8, 1).astype("float32") / 16.0, (32, 32)).numpy()
y = digits.target
reps = -(-steps * batch // len(x))
x, y = np.concatenate([x] * reps)[:steps * batch], np.concatenate([y] * reps)[:steps * batch]

model = keras.Sequential([
    keras.Input(shape=(32, 32, 1)),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")

try:
    import tfmpi
    first = tfmpi.rank() == 0
except Exception:  # one process, no tfmpirun
    first = True


class StepTimes(keras.callbacks.Callback):
    def __init__(self):
        self.ends = []

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, step, logs=None):
        self.ends.append(time.perf_counter() - self.start)
        if first:
            with open(out + ".progress", "w") as f:
                f.write(str(step + 1))


times = StepTimes()
model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=[times])
if first:
    with open(out, "w") as f:
        json.dump({"step_ends": times.ends}, f)
