"""Losses that are not the compiled loss: a subclassed model that adds an
activity penalty with add_loss (a mean over its slice of the batch) and a
weight penalty (kernel_regularizer); or ("dict") a functional model with dict
inputs whose loss is computed inside a layer from a Keras Loss and added with
add_loss, sample weights coming in as an input; both by default, one after
the other; each also evaluates with a last batch of one sample. Usage: train_add_loss.py OUT_DIR [subclassed,dict]"""

import sys

import numpy as np
import tensorflow as tf

import common
from common import keras

common.setup_determinism()
x, y = common.digits()


class Penalised(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(32, activation="relu",
                                         kernel_regularizer=keras.regularizers.L2(1e-3))
        self.out = keras.layers.Dense(10)

    def call(self, inputs, training=False):
        h = self.hidden(inputs)
        self.add_loss(1e-3 * tf.reduce_mean(tf.reduce_sum(tf.square(h), axis=1)))
        return self.out(h)


class LogisticEndpoint(keras.layers.Layer):
    """Computes the training loss itself (the Keras guide's endpoint layer)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="endpoint_accuracy")

    def call(self, targets, logits, sample_weight):
        self.add_loss(self.loss_fn(targets, logits, sample_weight))
        self.accuracy.update_state(targets, logits, sample_weight)
        return tf.nn.softmax(logits)


BATCH = 64  # 29 steps per epoch


def subclassed():
    model = Penalised()
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    record = common.RecordLoss(common.batch_sizes(len(x), BATCH))
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0, callbacks=[record])
    common.evaluate(model, x, y)
    # 1797 = 4 x 449 + 1: a last batch of one row, fewer than the ranks: every
    # rank computes it whole and it counts once (Note [Batches smaller than the ranks])
    common.evaluate(model, x, y, batch_size=449)
    common.collect(record.losses, model, record.bounds)


def dict_inputs():
    pixels = keras.Input((64,), name="pixels")
    targets = keras.Input((), dtype="int32", name="targets")
    weights = keras.Input((), name="weights")
    logits = keras.layers.Dense(10)(keras.layers.Dense(32, activation="tanh")(pixels))
    probabilities = LogisticEndpoint()(targets, logits, weights)
    model = keras.Model({"pixels": pixels, "targets": targets, "weights": weights}, probabilities)
    model.compile(optimizer=common.optimizer(keras.optimizers.Adam(3e-3)))
    sample_weight = (0.5 + (np.arange(len(y)) % 4) / 2).astype("float32")
    inputs = {"pixels": x, "targets": y, "weights": sample_weight}
    record = common.RecordLoss(common.batch_sizes(len(x), BATCH))
    model.fit(inputs, batch_size=BATCH, epochs=2, shuffle=True, verbose=0, callbacks=[record])
    common.evaluate(model, inputs)
    common.evaluate(model, inputs, batch_size=449)
    common.collect(record.losses, model, record.bounds)


for i, mode in enumerate((sys.argv[2] if len(sys.argv) > 2 else "subclassed,dict").split(",")):
    keras.utils.set_random_seed(31 + i)
    {"subclassed": subclassed, "dict": dict_inputs}[mode]()
common.write_run()
