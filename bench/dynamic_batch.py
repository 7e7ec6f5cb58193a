"""What a batch dimension of unknown size costs a traced training step (Note
[Shares by default], python/tfmpi/transparent/config.py).

Adaptive work shares cut each rank's slice at bounds read from a variable, so
the traced step sees a batch of unknown size. This times one process training
bench/step_job.py's models on a slice of `--rows` rows of a batch of 2 x rows,
cut at constant bounds (a known size) and at bounds held in variables (an
unknown size), interleaved, `--rounds` times each:

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 taskset -c 0 \\
        python bench/dynamic_batch.py lstm --rounds 2

Prints "<model> known|unknown <mean ms per step>" per round.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(model_name, cut, rows, steps):
    import numpy as np
    import tensorflow as tf
    import keras

    sys.path.insert(0, HERE)
    from step_job import MODELS

    keras.utils.set_random_seed(1)
    _, inputs, build = MODELS[model_name]
    model = build()
    opt = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x = tf.constant(inputs(2 * rows))
    y = tf.constant(np.random.randint(0, 10, 2 * rows))
    lo, hi = tf.Variable(0), tf.Variable(rows)

    @tf.function
    def step(x, y):
        if cut == "unknown":
            x, y = x[lo:hi], y[lo:hi]
        else:
            x, y = x[:rows], y[:rows]
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(10):
        step(x, y)
    start = time.perf_counter()
    for _ in range(steps):
        step(x, y)
    print(f"{model_name} {cut} {1000 * (time.perf_counter() - start) / steps:.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=("mlp", "cnn", "lstm"))
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", choices=("known", "unknown"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rows < 1 or args.steps < 1 or args.rounds < 1:
        parser.error("--rows, --steps and --rounds must be at least 1")
    if args.one:
        one(args.model, args.one, args.rows, args.steps)
        return
    for _ in range(args.rounds):
        for cut in ("known", "unknown"):  # each in a fresh process
            subprocess.run([sys.executable, __file__, args.model, "--rows", str(args.rows),
                            "--steps", str(args.steps), "--one", cut], check=True)


if __name__ == "__main__":
    main()
