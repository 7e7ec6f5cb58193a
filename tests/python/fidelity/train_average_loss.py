"""The loss idiom of TensorFlow's distributed-training tutorials in a custom
loop: tf.nn.compute_average_loss(per_example_loss, global_batch_size=B) plus
tf.nn.scale_regularization_loss(sum(model.losses)), with a kernel
regularizer. Usage: train_average_loss.py OUT_DIR"""

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(71)
x, y = common.digits()
BATCH = 48  # 1797 samples: 38 steps per epoch, the last one ragged (21)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000, seed=2).batch(BATCH)
model = keras.Sequential([keras.Input((64,)),
                          keras.layers.Dense(32, activation="tanh",
                                             kernel_regularizer=keras.regularizers.L2(1e-3)),
                          keras.layers.Dense(10)])
optimizer = keras.optimizers.SGD(0.1)
per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = tf.nn.compute_average_loss(per_example(yb, logits), global_batch_size=BATCH)
        loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


losses = []
for epoch in range(3):
    for xb, yb in dataset:
        losses.append(float(train_step(xb, yb)))
    print(f"EPOCH {epoch} last_loss={losses[-1]:.8f}", flush=True)
common.write_run(losses, model)
