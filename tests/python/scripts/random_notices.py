"""Random draws that cannot be the 1-process draws under a split batch, each
once (plain Keras and TensorFlow; never imports tfmpi):
- a permutation of the slice's row indices, in a layer of a model trained by fit;
- tf.random.gamma with one alpha per row (the legacy op puts them last);
- tf.random.uniform with an op seed (a legacy stateful op) in a custom loop."""

import numpy as np
import tensorflow as tf
import keras


class Permute(keras.layers.Layer):
    def call(self, x):
        return tf.gather(x, tf.random.shuffle(tf.range(tf.shape(x)[0])))


class PerRowGamma(keras.layers.Layer):
    def call(self, x):
        return x * tf.random.gamma([1], alpha=tf.reduce_mean(x, 1) + 1.0)[0][:, None]


keras.utils.set_random_seed(1)
x = np.random.rand(64, 4).astype("float32")
y = np.random.rand(64, 1).astype("float32")
model = keras.Sequential([keras.Input((4,)), Permute(name="permute"),
                          PerRowGamma(name="per_row_gamma"), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, y, batch_size=16, epochs=2, verbose=0)


@tf.function
def step(xb, yb):
    with tf.GradientTape() as tape:
        noisy = xb + tf.random.uniform(tf.shape(xb), maxval=0.01, seed=3)
        loss = tf.reduce_mean(tf.square(model(noisy) - yb))
    grads = tape.gradient(loss, model.trainable_variables)
    for v, g in zip(model.trainable_variables, grads):
        v.assign_sub(0.01 * g)
    return loss


for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).batch(16):
    step(xb, yb)
print("DONE", flush=True)
