"""A custom tf.GradientTape training loop over a tf.data pipeline (no tfmpi
import): digits MLP with a tf.function train step and a Keras metric.

    python examples/custom_loop.py
    tfmpirun -np 2 python examples/custom_loop.py
"""

import argparse

import keras
import tensorflow as tf
from sklearn.datasets import load_digits


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    keras.utils.set_random_seed(7)
    x, y = load_digits(return_X_y=True)
    dataset = (tf.data.Dataset.from_tensor_slices(((x / 16.0).astype("float32"), y))
               .shuffle(len(x)).batch(args.batch_size))

    model = keras.Sequential([keras.Input(shape=(64,)),
                              keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10)])
    optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    accuracy = keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        accuracy.update_state(yb, logits)
        return loss

    step = 0
    for epoch in range(args.epochs):
        accuracy.reset_state()
        for xb, yb in dataset:
            loss = train_step(xb, yb)
            if step % 10 == 0:
                print(f"step {step:4d}  loss {float(loss):.6f}")
            step += 1
        print(f"epoch {epoch + 1}: accuracy {float(accuracy.result()):.4f}")


if __name__ == "__main__":
    main()
