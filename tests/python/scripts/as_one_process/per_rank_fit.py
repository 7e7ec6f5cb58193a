"""fit in per-rank batch mode (each rank's batch of BATCH rows; dealt by
speed, Note [Batches by shares]) or, as one process, on batches of N * BATCH:
the losses, the slice sizes this rank trained on and the weights, in
rank-<rank>.json. Usage: per_rank_fit.py OUT BATCH LOSS LR DATA [then]
LOSS: mean or sum; DATA: arrays, shuffled (arrays shuffled each epoch),
dataset (a pipeline with a map before its batch) or endless (a repeated
pipeline, epochs cut by steps_per_epoch); `then`: evaluation between the
epochs, and afterwards train_on_batch on batches each rank holds whole."""

import os
import sys

import numpy as np
import tensorflow as tf

from small_data import Record, keras, write

batch, loss_kind, lr, data = int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5]
then = len(sys.argv) > 6
keras.utils.set_random_seed(4)
rng = np.random.default_rng(0)
x = rng.normal(size=(240, 5)).astype("float32")
y = (x[:, :1] * 0.7 - x[:, 1:2]).astype("float32")
ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
steps = None
if data == "dataset":  # a pipeline input sharding rewrites (a map before the batch)
    train = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 1.0, b)).batch(batch)
elif data == "endless":  # no length: fit's steps_per_epoch says where an epoch ends
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).repeat()
    steps = 240 // (batch * ranks)
else:
    train = None
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1)])
loss = keras.losses.MeanSquaredError(
    reduction="sum" if loss_kind == "sum" else "sum_over_batch_size")
model.compile(keras.optimizers.SGD(lr), loss)
record = Record()
kwargs = dict(epochs=2, verbose=0, callbacks=[record])
if then:  # evaluation between the epochs
    kwargs["validation_data"] = (x[:40], y[:40])
if train is None:
    model.fit(x, y, batch_size=batch, shuffle=data == "shuffled", **kwargs)
else:
    model.fit(train, steps_per_epoch=steps, **kwargs)
if then:  # then train_on_batch on batches dealt to the ranks (each its own)
    for xb, yb in tf.data.Dataset.from_tensor_slices((x[:4 * batch], y[:4 * batch])).batch(batch):
        record.losses.append(float(np.ravel(model.train_on_batch(xb, yb))[0]))
write(record.losses, model, sizes=sorted(record.sizes))
