"""An iterator made eagerly and read by next() inside tf.functions (passed as
an argument, and closed over in a tf.while_loop); `rows` counts the rows this
process's steps took."""

import tensorflow as tf

from small_data import keras, write, x, y

data = (tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 1.5, b)).batch(32)
        .repeat())
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3, activation="tanh"),
                          keras.layers.Dense(1)])
optimizer = keras.optimizers.Adam(0.05)
mse, mean = keras.losses.MeanSquaredError(), keras.metrics.Mean()
rows = tf.Variable(0, dtype=tf.int64)


def step(xb, yb):
    rows.assign_add(tf.shape(xb, out_type=tf.int64)[0])
    with tf.GradientTape() as tape:
        loss = mse(yb, model(xb))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    mean.update_state(loss)


iterator = iter(data)  # made eagerly, read inside functions


@tf.function
def one(it):
    step(*next(it))


def body(i):
    step(*next(iterator))
    return i + 1


@tf.function
def several(n):
    tf.while_loop(lambda i: i < n, body, [tf.constant(0)])


loss = []
for _ in range(4):
    one(iterator)
    loss.append(float(mean.result()))
for _ in range(3):
    several(tf.constant(4))
    loss.append(float(mean.result()))
write(loss, model, rows=int(rows.numpy()))
