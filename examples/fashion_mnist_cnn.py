"""A plain Keras CNN on Fashion-MNIST, read from the idx files that Debian's
dataset-fashion-mnist package installs (nothing is downloaded). No tfmpi import.

    python examples/fashion_mnist_cnn.py
    tfmpirun -np 2 python examples/fashion_mnist_cnn.py
"""

import argparse
import gzip
import os
import struct

import keras
import numpy as np

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        zero, dtype_code, ndim = struct.unpack(">HBB", f.read(4))
        if zero != 0 or dtype_code != 0x08:
            raise ValueError(f"{path} is not an unsigned-byte idx file")
        shape = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), np.uint8).reshape(shape)


def load(split):
    prefix = "train" if split == "train" else "t10k"
    images = os.path.join(DATA_DIR, f"{prefix}-images-idx3-ubyte.gz")
    labels = os.path.join(DATA_DIR, f"{prefix}-labels-idx1-ubyte.gz")
    if not os.path.exists(images):
        raise SystemExit(f"{images} not found: install Debian's dataset-fashion-mnist package "
                         "(scripts/setup.sh does) or set FASHION_MNIST_DIR")
    x = (read_idx(images).astype("float32") / 255.0)[..., None]
    return x, read_idx(labels).astype("int32")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--train-samples", type=int, default=None, help="use the first N samples")
    parser.add_argument("--checkpoint", default=None, help="save the best model to this .keras file")
    args = parser.parse_args()

    x_train, y_train = load("train")
    x_test, y_test = load("test")
    if args.train_samples:
        x_train, y_train = x_train[:args.train_samples], y_train[:args.train_samples]

    model = keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks = []
    if args.checkpoint:
        callbacks.append(keras.callbacks.ModelCheckpoint(args.checkpoint, save_best_only=True))
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              validation_split=0.1, shuffle=True, callbacks=callbacks)
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"test accuracy: {accuracy:.4f} (loss {loss:.4f})")


if __name__ == "__main__":
    main()
