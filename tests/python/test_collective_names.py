"""Collective names never depend on a rank's own history (Note [Collective
names], python/tfmpi/transparent/naming.py). A custom loop splits batches of
10 over 4 ranks (slices of 3, 3, 2, 2) with a ragged last batch of 7 (2, 2, 2,
1), so the ranks see different slice shapes and retrace their step a
different number of times; the step has synchronized BatchNormalization and
reads a metric's result inside the traced function (tf_keras swaps the
metric's state there). Then model.fit runs with callbacks that exist on rank
0 only or write there only and read the model's variables (ModelCheckpoint
saving the best weights, CSVLogger).
The run must finish, and match the 1-process run."""

import json
import os
import sys

import numpy as np
import pytest

from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

SCRIPT = """
import os, sys, json
import numpy as np, tensorflow as tf
out = sys.argv[1]
tf.config.experimental.enable_op_determinism()
keras.utils.set_random_seed(4)
x = np.random.default_rng(0).random((47, 6)).astype("float32")
y = (x.sum(1) > 3).astype("int32")
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8),
                          keras.layers.BatchNormalization(), keras.layers.Activation("relu"),
                          keras.layers.Dense(2)])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(0.1)
accuracy = keras.metrics.SparseCategoricalAccuracy()
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(10)   # 10, 10, 10, 10, 7

@tf.function
def step(xb, yb):
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = loss_fn(yb, logits)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    accuracy.update_state(yb, logits)
    return loss, accuracy.result()

values = []
for epoch in range(3):
    for xb, yb in dataset:
        loss, acc = step(xb, yb)
        values += [float(loss), float(acc)]
model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss_fn, metrics=["accuracy"])
best = os.path.join(out, "best.weights.h5" if hasattr(keras, "ops") else "best.h5")
history = model.fit(x, y, batch_size=10, epochs=2, verbose=0, validation_data=(x, y),
                    callbacks=[keras.callbacks.ModelCheckpoint(best, save_best_only=True,
                                                               save_weights_only=True),
                               keras.callbacks.CSVLogger(os.path.join(out, "log.csv"))])
values += [float(v) for v in history.history["loss"] + history.history["val_loss"]]
json.dump(values, open(os.path.join(out, f"values-{os.getpid()}.json"), "w"))
print("DONE", flush=True)
"""


def test_ranks_that_retrace_differently_agree_on_every_collective(flavour, tmp_path):
    prelude, env = flavour
    env = {**QUIET, **env, "TFMPI_SYNC_BATCHNORM": "1", "TFMPI_STALL_TIMEOUT_SECONDS": "20"}
    ref_dir, got_dir = tmp_path / "ref", tmp_path / "got"
    ref_dir.mkdir()
    got_dir.mkdir()
    r = run([sys.executable, "-c", prelude + SCRIPT, str(ref_dir)], 240, env=env)
    assert r.returncode == 0, r.stdout
    r = run(["tfmpirun", "-np", "4", sys.executable, "-c", prelude + SCRIPT, str(got_dir)], 400,
            env=env)
    assert r.returncode == 0, r.stdout
    (ref,) = [json.load(open(ref_dir / f)) for f in os.listdir(ref_dir) if f.startswith("values")]
    got = [json.load(open(got_dir / f)) for f in os.listdir(got_dir) if f.startswith("values")]
    assert len(got) == 4
    for values in got:
        np.testing.assert_allclose(values, ref, rtol=1e-5)
    assert (got_dir / "log.csv").exists()
    assert len([f for f in os.listdir(got_dir) if f.startswith("best")]) == 1
