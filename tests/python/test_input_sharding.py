"""Sharded input (Note [Sharded input], python/tfmpi/transparent/input_sharding.py):
under tfmpirun each rank runs a pipeline's per-element work only for the
samples of its slices. The script logs every element its maps decode (tf.print
to a file per rank); each pass over the data must be decoded exactly once over
all ranks, each rank doing only part of it, in fit (training and validation),
evaluate, predict and a custom loop. Pipelines that cannot be rewritten say so
and are decoded whole on every rank, as TFMPI_INPUT_SHARDING=0 asks. Whether
the training math is unchanged is the fidelity tier's input_pipeline kind
(with adaptive shares). Here the shares are equal, so that no
cut is empty (an empty cut decodes one row it then drops, and its step
gathers the ranks' rows: Note [Batches smaller than the ranks])."""

import collections
import os
import re
import sys

import pytest

from conftest import flavour_of
from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2", "TFMPI_SHARES": "equal"}
N_SAMPLES, BATCH, EPOCHS = 203, 20, 2  # 11 batches, the last of 3

SCRIPT = """
import os, sys
import numpy as np, tensorflow as tf
work = sys.argv[1]
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
log = "file://" + os.path.join(work, f"decoded-{rank}.log")
x = np.random.default_rng(0).random((203, 4)).astype("float32")
y = x.sum(1, keepdims=True)

def pipeline(tag, seed=None, random_map=False):
    def decode(i):
        tf.print(tag, i, output_stream=log)
        noise = tf.random.uniform([4]) * 0.0 if random_map else 0.0
        return tf.gather(x, i) + noise, tf.gather(y, i)
    order = tf.data.Dataset.range(203)
    if seed is not None:
        order = order.shuffle(203, seed=seed)
    return order.map(decode, num_parallel_calls=4).batch(20).prefetch(1)

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(pipeline("fit", seed=1), epochs=2, validation_data=pipeline("val"), verbose=0)
model.evaluate(pipeline("evaluate"), verbose=0)
assert model.predict(pipeline("predict"), verbose=0).shape == (203, 1)
optimizer = keras.optimizers.SGD(0.01)
for xb, yb in pipeline("loop", seed=2):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb) - yb) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
model.evaluate(pipeline("random", random_map=True), verbose=0)
print("TRAINED", flush=True)
"""

# How many passes each tag makes over the 203 samples.
PASSES = {"fit": EPOCHS, "val": EPOCHS, "evaluate": 1, "predict": 1, "loop": 1, "random": 1}


def _decoded(work, np_):
    """rank -> tag -> Counter of sample indices that rank decoded."""
    out = {}
    for r in range(np_):
        counts = collections.defaultdict(collections.Counter)
        with open(os.path.join(work, f"decoded-{r}.log")) as f:
            for line in f:
                m = re.fullmatch(r"(\w+) (\d+)", line.strip())
                assert m, f"rank {r}: unexpected log line {line!r}"
                counts[m.group(1)][int(m.group(2))] += 1
        out[r] = counts
    return out


@pytest.mark.parametrize("keras_line,np_", [("keras3", 2), ("keras3", 3), ("tf_keras", 2)])
def test_each_rank_decodes_only_its_slices(keras_line, np_, tmp_path):
    prelude, env = flavour_of(keras_line)
    r = run(["tfmpirun", "-np", str(np_), sys.executable, "-c", prelude + SCRIPT, str(tmp_path)],
            300, env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    assert "TRAINED" in r.stdout
    decoded = _decoded(tmp_path, np_)
    for tag, passes in PASSES.items():
        total = collections.Counter()
        for rank in range(np_):
            total += decoded[rank][tag]
        if tag == "random":  # not rewritten: every rank decodes everything
            assert all(decoded[rank][tag] == {i: 1 for i in range(N_SAMPLES)}
                       for rank in range(np_)), tag
            continue
        assert total == {i: passes for i in range(N_SAMPLES)}, f"{tag}: {total}"
        for rank in range(np_):
            mine = sum(decoded[rank][tag].values())
            assert 0 < mine < N_SAMPLES * passes, (tag, rank, mine)
    # The pipeline with a random op in its map is named once, with the reason.
    notices = [line for line in r.stdout.splitlines() if "is not sharded" in line]
    assert len(notices) == 1 and "RandomUniform" in notices[0], notices


def test_sharding_can_be_turned_off(tmp_path):
    prelude, _ = flavour_of("keras3")
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", prelude + SCRIPT, str(tmp_path)], 300,
            env={**QUIET, "TFMPI_INPUT_SHARDING": "0"})
    assert r.returncode == 0, r.stdout
    decoded = _decoded(tmp_path, 2)
    for rank in range(2):
        assert decoded[rank]["fit"] == {i: EPOCHS for i in range(N_SAMPLES)}
    assert "is not sharded" not in r.stdout


@pytest.mark.parametrize("keras_line", ["keras3", "tf_keras"])
def test_per_rank_mode_decodes_only_the_dealt_batches(keras_line, tmp_path):
    prelude, env = flavour_of(keras_line)
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", prelude + SCRIPT, str(tmp_path)], 300,
            env={**QUIET, **env, "TFMPI_BATCH_MODE": "per-rank"})
    assert r.returncode == 0, r.stdout
    decoded = _decoded(tmp_path, 2)
    # fit deals 10 of the 11 batches of each epoch, 5 to each rank (docs/transparent.md).
    total = decoded[0]["fit"] + decoded[1]["fit"]
    assert sum(total.values()) == 10 * BATCH * EPOCHS and max(total.values()) <= EPOCHS, total
    for rank in range(2):
        assert sum(decoded[rank]["fit"].values()) == 5 * BATCH * EPOCHS
    # Evaluation and prediction are split in both batch modes.
    for tag in ("evaluate", "predict"):
        assert decoded[0][tag] + decoded[1][tag] == {i: 1 for i in range(N_SAMPLES)}, tag



@pytest.mark.parametrize("keras_line", ["keras3", "tf_keras"])
def test_per_rank_mode_by_shares_decodes_only_the_rows_of_its_slices(keras_line, tmp_path):
    # Note [Batches by shares] (per_rank.py): fit's steps take 2 batches of 20
    # together, cut 10 / 30 by the pinned shares; each rank decodes only its rows.
    prelude, env = flavour_of(keras_line)
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", prelude + SCRIPT, str(tmp_path)], 300,
            env={**QUIET, **env, "TFMPI_BATCH_MODE": "per-rank", "TFMPI_SHARES": "adaptive",
                 "TFMPI_PROBE_SPEEDS": "1,3", "TFMPI_REBALANCE_STEPS": "0"})
    assert r.returncode == 0, r.stdout
    decoded = _decoded(tmp_path, 2)
    total = decoded[0]["fit"] + decoded[1]["fit"]
    assert sum(total.values()) == 10 * BATCH * EPOCHS and max(total.values()) <= EPOCHS, total
    assert sum(decoded[0]["fit"].values()) == 5 * 10 * EPOCHS
    assert sum(decoded[1]["fit"].values()) == 5 * 30 * EPOCHS

READER_SCRIPT = """
import json, os, sys
import numpy as np, tensorflow as tf, keras
import tfmpi.data
path, out = sys.argv[1], sys.argv[2]
keras.utils.set_random_seed(4)
rows = tfmpi.data.hdf5(path, ["x", "y"], shuffle=True, seed=9)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.01), "mse")
history = model.fit(rows.batch(50), epochs=2, verbose=0)
loss = model.evaluate(tfmpi.data.hdf5(path, ["x", "y"]).map(lambda x, y: (x * 1.0, y)).batch(64),
                      verbose=0)
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
    json.dump({"loss": history.history["loss"], "eval": loss, "bytes": tfmpi.data.bytes_read(),
               "weights": [w.tolist() for w in model.get_weights()]}, f)
"""


@pytest.mark.parametrize("np_", [3, 4])
def test_a_tfmpi_data_reader_is_read_in_parts(np_, tmp_path):
    """Each rank reads about 1/N of the file's bytes, and trains as one process does."""
    import json

    import numpy as np

    h5py = pytest.importorskip("h5py", reason="h5py writes the test file")
    path = str(tmp_path / "data.h5")
    x = np.random.default_rng(1).random((1003, 16)).astype("float32")
    with h5py.File(path, "w") as f:
        f["x"] = x
        f["y"] = x.sum(1, keepdims=True)
    one, many = tmp_path / "one", tmp_path / "many"
    one.mkdir(), many.mkdir()
    r = run([sys.executable, "-c", READER_SCRIPT, path, str(one)], 300, env=QUIET)
    assert r.returncode == 0, r.stdout
    r = run(["tfmpirun", "-np", str(np_), sys.executable, "-c", READER_SCRIPT, path, str(many)], 300,
            env=QUIET)
    assert r.returncode == 0, r.stdout
    assert "is not sharded" not in r.stdout
    alone = json.loads((one / "rank-0.json").read_text())
    for rank in range(np_):
        mine = json.loads((many / f"rank-{rank}.json").read_text())
        np.testing.assert_allclose(mine["loss"], alone["loss"], rtol=1e-5)
        np.testing.assert_allclose(mine["eval"], alone["eval"], rtol=1e-5)
        for a, b in zip(mine["weights"], alone["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        # 2 epochs + 1 evaluation, each over the whole file alone; 1/N of it per rank.
        assert mine["bytes"] <= 1.1 * alone["bytes"] / np_, (rank, mine["bytes"], alone["bytes"])
