"""Preprocessing layers adapted on tf.data datasets (Normalization,
TextVectorization): adapt must see the whole data on every rank. The
Normalization layer's mean and variance are among the model's weights."""

import numpy as np
import tensorflow as tf

from small_data import keras, rng, write, y

features = (rng.normal(size=(300, 5)) * 2 + 3).astype("float32")
norm = keras.layers.Normalization()
norm.adapt(tf.data.Dataset.from_tensor_slices(features).batch(64))
other = keras.layers.Normalization()
other.adapt(tf.data.Dataset.from_tensor_slices(features[:, :2]).batch(50))
text = keras.layers.TextVectorization(max_tokens=12)
text.adapt(tf.data.Dataset.from_tensor_slices([f"w{i % 37} w{i % 11} w{i % 5}" for i in range(300)])
           .batch(64))
model = keras.Sequential([keras.Input((5,)), norm, keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse")
loss = model.fit(features[:192], y, batch_size=32, epochs=2, verbose=0).history["loss"]
loss += list(np.ravel(other.mean)) + list(np.ravel(other.variance))
loss += list(np.ravel(text(tf.constant(["w0 w1 w4 w10 w36"]))))
write(loss, model)
