"""A plain Keras fit of a tiny model that runs for a long time (under tfmpirun its
gradients go through tfmpi's TensorFlow ops). Reports each rank's pid and host once
training runs (run with TFMPI_ALL_RANKS_OUTPUT=1)."""
import os
import socket

import numpy as np
import keras

import tfmpi


class Report(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 5:
            print(f"rank {tfmpi.rank()} pid {os.getpid()} host {socket.gethostname()}", flush=True)
        if batch % 200 == 0:
            print(f"rank {tfmpi.rank()} step {batch + 1}", flush=True)


rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="sgd", loss="binary_crossentropy")
data = np.repeat(x, 2000, axis=0), np.repeat(y, 2000, axis=0)
model.fit(*data, batch_size=16, epochs=1000, verbose=0, callbacks=[Report()])
