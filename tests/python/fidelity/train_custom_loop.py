"""Custom GradientTape loop fidelity run over a shuffled, batched tf.data
dataset with a tf.function step, a built-in metric and a metric class defined
here, whose results are read eagerly each epoch. With "sum", the loss is
reduced by summing over the batch (plain SGD, batches of 50 that split
unevenly over 3 ranks), so a mean-style combination of the ranks' losses or
gradients would show. Usage: train_custom_loop.py OUT_DIR [sum]"""

import sys

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(5)
x, y = common.digits()
summed = len(sys.argv) > 2 and sys.argv[2] == "sum"
batch = 50 if summed else 48  # 1797 samples: a ragged last batch either way
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000).batch(batch)

model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(32, activation="tanh"),
                          keras.layers.Dense(10)])
if summed:
    optimizer = keras.optimizers.SGD(2e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
else:
    optimizer = common.optimizer(keras.optimizers.Adam(1e-2))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


class MeanMaxLogit(keras.metrics.Metric):
    def __init__(self):
        super().__init__(name="mean_max_logit")
        self.total = self.add_weight(name="total", shape=(), initializer="zeros")
        self.count = self.add_weight(name="count", shape=(), initializer="zeros")

    def update_state(self, logits):
        top = tf.reduce_max(logits, axis=1)
        self.total.assign_add(tf.reduce_sum(top))
        self.count.assign_add(tf.cast(tf.shape(top)[0], tf.float32))

    def result(self):
        return self.total / self.count


accuracy = keras.metrics.SparseCategoricalAccuracy()
max_logit = MeanMaxLogit()


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = loss_fn(yb, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    accuracy.update_state(yb, logits)
    max_logit.update_state(logits)
    return loss


losses, epoch_metrics = [], []
for epoch in range(3):  # 38 (36 with sum) steps per epoch
    for xb, yb in dataset:
        losses.append(float(train_step(xb, yb)))
    epoch_metrics += [float(accuracy.result()), float(max_logit.result())]
    print(f"EPOCH {epoch} last_loss={losses[-1]:.8f} accuracy={epoch_metrics[-2]:.8f} "
          f"mean_max_logit={epoch_metrics[-1]:.8f}", flush=True)
    accuracy.reset_state()
    max_logit.reset_state()
common.write_run(losses, model, extra=epoch_metrics)
