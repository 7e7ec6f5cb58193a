"""Custom GradientTape loop fidelity run over a shuffled, batched tf.data
dataset with a tf.function step. Usage: train_custom_loop.py OUT_DIR"""

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(5)
x, y = common.digits()
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000).batch(48)  # ragged last batch

model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(32, activation="tanh"),
                          keras.layers.Dense(10)])
optimizer = keras.optimizers.Adam(1e-2)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


losses = []
for epoch in range(3):  # 38 steps per epoch
    for xb, yb in dataset:
        losses.append(float(train_step(xb, yb)))
    print(f"EPOCH {epoch} last_loss={losses[-1]:.8f}", flush=True)
common.write_run(losses, model)
