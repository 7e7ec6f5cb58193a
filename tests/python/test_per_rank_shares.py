"""Per-rank batch mode dealing by work shares (Note [Batches by shares],
python/tfmpi/transparent/per_rank.py): the N batches of a step are cut by
speed, and every update is still the average of the N per-rank updates, so
N ranks with per-rank batch B train as one process with batch N*B. The shares
are pinned unequal (TFMPI_PROBE_SPEEDS, no rebalancing), and each rank
reports the slice sizes it trained on, so a run that quietly fell back to
equal batches fails."""

import json
import sys

import numpy as np
import pytest

from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

# Keras callback for the scripts below: each step's loss into `losses`, and the
# slice sizes this rank trained on into `sizes`.
RECORD = """
class Record(keras.callbacks.Callback):
    def on_train_batch_end(self, step, logs=None):
        losses.append(float(logs["loss"]))
        try:
            import tfmpi.transparent.state as s
            if s.split is not None:
                sizes.add(int(s.split.numpy()[1]))
        except ImportError:
            pass
"""

SCRIPT = """
import json, os, sys
import numpy as np, tensorflow as tf
batch, loss_kind, lr, data, out = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
keras.utils.set_random_seed(4)
rng = np.random.default_rng(0)
x = rng.normal(size=(240, 5)).astype("float32")
y = (x[:, :1] * 0.7 - x[:, 1:2]).astype("float32")
ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
steps = None
if data == "dataset":  # a pipeline input sharding rewrites (a map before the batch)
    train = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 1.0, b)).batch(batch)
elif data == "endless":  # no length: fit's steps_per_epoch says where an epoch ends
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).repeat()
    steps = 240 // (batch * ranks)
else:
    train = None
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1)])
loss = keras.losses.MeanSquaredError(reduction="sum" if loss_kind == "sum" else "sum_over_batch_size")
model.compile(keras.optimizers.SGD(lr), loss)
losses, sizes = [], set()
""" + RECORD + """kwargs = dict(epochs=2, verbose=0, callbacks=[Record()])
if len(sys.argv) > 6:  # evaluation between the epochs
    kwargs["validation_data"] = (x[:40], y[:40])
if train is None:
    model.fit(x, y, batch_size=batch, shuffle=data == "shuffled", **kwargs)
else:
    model.fit(train, steps_per_epoch=steps, **kwargs)
if len(sys.argv) > 6:  # then train_on_batch on batches dealt to the ranks (each its own)
    for xb, yb in tf.data.Dataset.from_tensor_slices((x[:4 * batch], y[:4 * batch])).batch(batch):
        losses.append(float(np.ravel(model.train_on_batch(xb, yb))[0]))
json.dump({"loss": losses, "sizes": sorted(sizes),
           "weights": [w.tolist() for w in model.get_weights()]},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
"""

PINNED = {"TFMPI_BATCH_MODE": "per-rank", "TFMPI_SHARES": "adaptive",
          "TFMPI_REBALANCE_STEPS": "0"}


def _train(argv, out, env, timeout=300, extra=()):
    out.mkdir()
    r = run(argv + [str(out), *extra], timeout, env=env)
    assert r.returncode == 0, r.stdout
    return r


@pytest.mark.parametrize("np_,speeds,sizes,data,loss_kind", [
    (2, "1,3", [[10], [30]], "arrays", "mean"),
    (2, "1,3", [[10], [30]], "dataset", "mean"),
    (2, "1,3", [[10], [30]], "endless", "mean"),
    (2, "1,3", [[10], [30]], "shuffled", "mean"),
    (3, "1,1,2", [[15], [15], [30]], "arrays", "sum"),
])
def test_unequal_slices_train_as_one_process_with_the_whole_batch(
        flavour, np_, speeds, sizes, data, loss_kind, tmp_path):
    prelude, keras_env = flavour
    code = prelude + SCRIPT
    env = {**QUIET, **keras_env}
    per_rank_batch = 20
    lr = 0.002 if loss_kind == "sum" else 0.05  # a sum of 20 squares: a smaller step
    # One process with the N batches of a step as its batch; a "sum" loss sums
    # N times as many samples there, so its learning rate is divided by N
    # (per-rank mode averages the ranks' updates).
    one_lr = lr / np_ if loss_kind == "sum" else lr
    _train([sys.executable, "-c", code, str(np_ * per_rank_batch), loss_kind, str(one_lr),
            data], tmp_path / "one", env)
    _train(["tfmpirun", "-np", str(np_), sys.executable, "-c", code, str(per_rank_batch),
            loss_kind, str(lr), data], tmp_path / "many",
           {**env, **PINNED, "TFMPI_PROBE_SPEEDS": speeds})
    ref = json.load(open(tmp_path / "one" / "rank-0.json"))
    scale = np_ if loss_kind == "sum" else 1  # the mean of the ranks' sums
    for rank in range(np_):  # every rank against the 1-process run
        got = json.load(open(tmp_path / "many" / f"rank-{rank}.json"))
        assert got["sizes"] == sizes[rank], f"rank {rank} trained on slices of {got['sizes']}"
        assert len(got["loss"]) == len(ref["loss"]) == 2 * 240 // (np_ * per_rank_batch)
        np.testing.assert_allclose(np.array(got["loss"]) * scale, ref["loss"], rtol=1e-5,
                                   err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")


def test_equal_shares_deal_whole_batches_every_epoch(flavour, tmp_path):
    # TFMPI_SHARES=equal: each rank trains on whole batches of its own (no
    # split), in every epoch (tf_keras holds arrays as one dataset of all
    # epochs: only the first epoch used to be dealt), as one process with both.
    prelude, keras_env = flavour
    code = prelude + SCRIPT
    env = {**QUIET, **keras_env}
    _train([sys.executable, "-c", code, "40", "mean", "0.05", "arrays"], tmp_path / "one", env)
    _train(["tfmpirun", "-np", "2", sys.executable, "-c", code, "20", "mean", "0.05", "arrays"],
           tmp_path / "many", {**env, **PINNED, "TFMPI_SHARES": "equal", "TFMPI_PROBE_SPEEDS": "1,3"})
    ref = json.load(open(tmp_path / "one" / "rank-0.json"))
    for rank in range(2):
        got = json.load(open(tmp_path / "many" / f"rank-{rank}.json"))
        assert got["sizes"] in ([], [0]), got["sizes"]
        assert len(got["loss"]) == len(ref["loss"]) == 12
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")


def test_sum_loss_and_train_on_batch_as_with_whole_batches(flavour, tmp_path):
    # A "sum" loss in fit (dealt by speed, with evaluation between the epochs) and
    # then in train_on_batch on the batches a custom loop deals (each rank holds
    # a batch of its own: not split) trains the same weights as whole batches.
    code = flavour[0] + SCRIPT
    args = ["tfmpirun", "-np", "2", sys.executable, "-c", code, "20", "sum", "0.002", "arrays"]
    env = {**QUIET, **flavour[1], **PINNED, "TFMPI_PROBE_SPEEDS": "1,3"}
    _train(args, tmp_path / "whole", {**env, "TFMPI_SHARES": "equal"}, extra=["then"])
    _train(args, tmp_path / "shares", env, extra=["then"])
    for rank in range(2):
        ref = json.load(open(tmp_path / "whole" / f"rank-{rank}.json"))
        got = json.load(open(tmp_path / "shares" / f"rank-{rank}.json"))
        assert got["sizes"] == [[10], [30]][rank] and len(got["loss"]) == 12 + 2
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")


SPARSE = """
import os, sys
import numpy as np, tensorflow as tf
rng = np.random.default_rng(0)
dense = (rng.random((80, 6)) < 0.3).astype("float32")
x = tf.sparse.from_dense(dense)
y = dense.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((6,), sparse=True), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.01), "mse")
history = model.fit(x, y, batch_size=10, epochs=1, shuffle=False, verbose=0)
print("STEPS", len(history.history["loss"]), model.optimizer.iterations.numpy())
"""


def test_sparse_data_dealt_by_speed_is_refused_with_the_way_out(tmp_path):
    # Putting a step's batches together needs dense or ragged tensors: a
    # SparseTensor input stops fit with an error naming TFMPI_SHARES=equal,
    # on every rank (no hang), and with that setting the same script trains.
    code = "import keras\n" + SPARSE
    args = ["tfmpirun", "-np", "2", sys.executable, "-c", code]
    env = {**QUIET, **PINNED, "TFMPI_PROBE_SPEEDS": "1,3"}
    r = run(args, 300, env=env)
    assert r.returncode != 0, r.stdout
    assert "SparseTensorSpec" in r.stdout and "TFMPI_SHARES=equal" in r.stdout, r.stdout
    r = run(args, 300, env={**env, "TFMPI_SHARES": "equal"})
    assert r.returncode == 0, r.stdout
    assert "STEPS 1 4" in r.stdout, r.stdout  # 8 batches, 4 per rank (rank 0 prints)


RAGGED = """
import json, os, sys
import numpy as np, tensorflow as tf
batch, out = int(sys.argv[1]), sys.argv[2]
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
keras.utils.set_random_seed(4)
rng = np.random.default_rng(0)
lengths = rng.integers(1, 7, size=160)  # sequences of 1-6 values
x = tf.RaggedTensor.from_row_lengths(rng.normal(size=lengths.sum()).astype("float32"), lengths)
y = (np.array([v.sum() for v in np.split(x.flat_values.numpy(), np.cumsum(lengths)[:-1])]) * 0.5
     + lengths * 0.1).astype("float32")[:, None]
class Summary(keras.layers.Layer):  # a ragged batch [B, (len)] -> [B, 2]: sum and length
    def compute_output_shape(self, shape):
        return (shape[0], 2)
    def call(self, r):
        return tf.stack([tf.reduce_sum(r, axis=1), tf.cast(r.row_lengths(), "float32")], axis=1)
model = keras.Sequential([Summary(), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse")
sizes = set()
""" + RECORD + """losses = []
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch), epochs=2, verbose=0,
          callbacks=[Record()])
json.dump({"loss": losses, "sizes": sorted(sizes), "weights": [w.tolist() for w in model.get_weights()]},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
"""


def test_ragged_data_dealt_by_speed_trains_as_one_process(tmp_path):
    # Variable-length sequences (a RaggedTensor component): a step's batches
    # are put together ragged and cut by the shares (10 and 30 of 2 x 20),
    # and every rank trains as one process with batches of 40.
    code = "import keras\n" + RAGGED
    env = {**QUIET, **PINNED, "TFMPI_PROBE_SPEEDS": "1,3"}
    _train([sys.executable, "-c", code, "40"], tmp_path / "one", QUIET)
    _train(["tfmpirun", "-np", "2", sys.executable, "-c", code, "20"], tmp_path / "many", env)
    ref = json.load(open(tmp_path / "one" / "rank-0.json"))
    assert len(ref["loss"]) == 2 * 160 // 40
    for rank in range(2):
        got = json.load(open(tmp_path / "many" / f"rank-{rank}.json"))
        assert got["sizes"] == [[10], [30]][rank], f"rank {rank} trained on slices of {got['sizes']}"
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
