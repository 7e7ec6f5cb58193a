"""Work shares in a custom training loop (Note [Live shares],
python/tfmpi/transparent/shares.py): a loop that iterates a dataset eagerly
is measured and rebalanced like fit, every rank takes the same decisions, and
the slices of every step still partition the batch. Two ranks of equal speed
start from deliberately unequal shares (TFMPI_PROBE_SPEEDS=1,0.2); how far the
shares move depends on the machine's timing, so the test checks that the
rebalancer ran on consistent measurements, not where it ended."""

import json
import sys

import numpy as np
import pytest

from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

SCRIPT = """
import os, sys
import numpy as np, tensorflow as tf, keras
work = sys.argv[1]
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
keras.utils.set_random_seed(0)
x = np.random.default_rng(0).random((256 * 30, 128)).astype("float32")
y = x.sum(1, keepdims=True)
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(256)
model = keras.Sequential([keras.Input((128,)), keras.layers.Dense(512, activation="relu"),
                          keras.layers.Dense(512, activation="relu"), keras.layers.Dense(1)])
opt = keras.optimizers.SGD(0.001)

@tf.function
def step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb) - yb) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

for epoch in range(2):
    for xb, yb in data:
        step(xb, yb)
np.save(os.path.join(work, f"weights-{rank}.npy"), np.concatenate([w.ravel() for w in model.get_weights()]))
"""


def test_a_custom_loop_is_rebalanced(tmp_path):
    log = tmp_path / "shares.json"
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "TFMPI_PROBE_SPEEDS": "1,0.2", "TFMPI_REBALANCE_STEPS": "5",
           "TFMPI_SHARES_LOG": str(log)}
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", SCRIPT, str(tmp_path)], 300, env=env)
    assert r.returncode == 0, r.stdout
    shares = json.loads(log.read_text())
    assert shares["initial"][1] < 0.2, shares["initial"]
    history = shares["history"]
    # Measured every 5 steps of 60 (the first step of each pass, and the step
    # after a change, are not measured): a dozen rebalances.
    assert len(history) >= 8, history
    for h in history:
        # Both ranks computed, in whole batches of 256 split between them.
        assert all(s > 0 for s in h["samples"]) and sum(h["samples"]) % 256 == 0, h
        assert abs(sum(h["fractions"]) - 1) < 1e-9, h
    # Every rank applied the same updates.
    w0, w1 = (np.load(tmp_path / f"weights-{rank}.npy") for rank in range(2))
    np.testing.assert_array_equal(w0, w1)
