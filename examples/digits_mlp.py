"""A plain Keras MLP on scikit-learn's bundled digits (no tfmpi import).

    python examples/digits_mlp.py                      # one process
    tfmpirun -np 2 python examples/digits_mlp.py       # two ranks, same results
"""

import argparse

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    keras.utils.set_random_seed(1)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0)

    model = keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              validation_data=(x_test, y_test), shuffle=True)
    loss, acc = model.evaluate(x_test, y_test, verbose=0)
    print(f"test loss {loss:.4f}  test accuracy {acc:.4f}")
    pred = model.predict(x_test[:8], verbose=0)
    print("first predictions:", np.argmax(pred, axis=1).tolist())


if __name__ == "__main__":
    main()
