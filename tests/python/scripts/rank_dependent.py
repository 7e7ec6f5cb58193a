"""A script that trains differently on each rank (its learning rate depends on
the MPI rank it reads from the environment), as a bug or a host-dependent
setting would make it: in model.fit ("fit") or in a custom loop updating by
hand ("loop"). Plain Keras and TensorFlow; never imports tfmpi.
Usage: rank_dependent.py fit|loop"""

import os
import sys

import numpy as np
import tensorflow as tf
import keras

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
lr = 0.1 if rank == 0 else 0.2
keras.utils.set_random_seed(1)
x = np.random.rand(64, 4).astype("float32")
y = np.random.rand(64, 1).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="hidden"),
                          keras.layers.Dense(1, name="out")])
if sys.argv[1] == "fit":
    model.compile(keras.optimizers.SGD(lr), "mse")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
else:
    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        for v, g in zip(model.trainable_variables, tape.gradient(loss, model.trainable_variables)):
            v.assign_sub(lr * g)
        return loss

    for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).batch(16):
        step(xb, yb)
print("TRAINED", flush=True)
