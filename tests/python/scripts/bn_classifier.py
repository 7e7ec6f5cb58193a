"""A small Keras classifier with BatchNormalization and Dropout, trained with
model.fit on scikit-learn's digits (plain Keras; never imports tfmpi):
5 epochs of 29 steps, batches of 64. Usage: bn_classifier.py [EPOCHS]"""

import os
import sys

import numpy as np
import keras

keras.utils.set_random_seed(3)
if os.environ.get("TESTS_DIGITS_FILE"):
    with np.load(os.environ["TESTS_DIGITS_FILE"]) as f:
        x, y = f["x"], f["y"]
else:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32").reshape(-1, 8, 8, 1)
model = keras.Sequential([
    keras.Input((8, 8, 1)),
    keras.layers.Conv2D(8, 3, padding="same"),
    keras.layers.BatchNormalization(),
    keras.layers.ReLU(),
    keras.layers.Flatten(),
    keras.layers.Dropout(0.2),
    keras.layers.Dense(10),
])
model.compile(keras.optimizers.SGD(0.1),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 5, verbose=0)
print("TRAINED", flush=True)
