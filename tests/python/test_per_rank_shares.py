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

import grouped_runs
from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

PINNED = {"TFMPI_BATCH_MODE": "per-rank", "TFMPI_SHARES": "adaptive",
          "TFMPI_REBALANCE_STEPS": "0"}


# fit in per-rank batch mode, or as one process with the N batches of a step
# as its batch (scripts/as_one_process/per_rank_fit.py).
FIT = "scripts/as_one_process/per_rank_fit.py"
RAGGED = "scripts/as_one_process/ragged_fit.py"
UNEQUAL = [
    (2, "1,3", [[10], [30]], "arrays", "mean"),
    (2, "1,3", [[10], [30]], "dataset", "mean"),
    (2, "1,3", [[10], [30]], "endless", "mean"),
    (2, "1,3", [[10], [30]], "shuffled", "mean"),
    (3, "1,1,2", [[15], [15], [30]], "arrays", "sum"),
]
PER_RANK_BATCH = 20


def _runs(line):
    """{name: grouped_runs.Run} of every run these tests check, for one Keras line:
    "<case>" under tfmpirun, "<case>-one" the 1-process run it is compared with."""
    keras_env = {"TF_USE_LEGACY_KERAS": "1"} if line == "tf_keras" else {}
    plain, runs = grouped_runs.Run((), keras_env, None), {}
    for np_, speeds, _, data, loss_kind in UNEQUAL:
        lr = 0.002 if loss_kind == "sum" else 0.05  # a sum of 20 squares: a smaller step
        # One process with the N batches of a step as its batch; a "sum" loss sums
        # N times as many samples there, so its learning rate is divided by N
        # (per-rank mode averages the ranks' updates).
        one_lr = lr / np_ if loss_kind == "sum" else lr
        case = f"unequal-{np_}-{data}-{loss_kind}"
        runs[case] = grouped_runs.Run(
            ("tfmpirun", "-np", str(np_)), {**keras_env, **PINNED, "TFMPI_PROBE_SPEEDS": speeds},
            [FIT, str(PER_RANK_BATCH), loss_kind, str(lr), data])
        runs[case + "-one"] = plain._replace(
            args=[FIT, str(np_ * PER_RANK_BATCH), loss_kind, str(one_lr), data])
    equal = {**keras_env, **PINNED, "TFMPI_SHARES": "equal", "TFMPI_PROBE_SPEEDS": "1,3"}
    dealt = {**keras_env, **PINNED, "TFMPI_PROBE_SPEEDS": "1,3"}
    np2 = ("tfmpirun", "-np", "2")
    runs["equal"] = grouped_runs.Run(np2, equal, [FIT, "20", "mean", "0.05", "arrays"])
    runs["equal-one"] = plain._replace(args=[FIT, "40", "mean", "0.05", "arrays"])
    then = [FIT, "20", "sum", "0.002", "arrays", "then"]
    runs["sum-whole"] = grouped_runs.Run(np2, equal, then)
    runs["sum-shares"] = grouped_runs.Run(np2, dealt, then)
    if line == "keras3":
        runs["ragged"] = grouped_runs.Run(np2, dealt, [RAGGED, "20"])
        runs["ragged-one"] = plain._replace(args=[RAGGED, "40"])
    return runs


def _runs_of(item):
    p = grouped_runs.params(item, "test_unequal_slices_train_as_one_process_with_the_whole_batch")
    if p is not None:
        case = f"unequal-{p['np_']}-{p['data']}-{p['loss_kind']}"
        return [(p["flavour"], case), (p["flavour"], case + "-one")]
    p = grouped_runs.params(item, "test_equal_shares_deal_whole_batches_every_epoch")
    if p is not None:
        return [(p["flavour"], "equal"), (p["flavour"], "equal-one")]
    p = grouped_runs.params(item, "test_sum_loss_and_train_on_batch_as_with_whole_batches")
    if p is not None:
        return [(p["flavour"], "sum-whole"), (p["flavour"], "sum-shares")]
    if grouped_runs.params(item, "test_ragged_data_dealt_by_speed_trains_as_one_process") is not None:
        return [("keras3", "ragged"), ("keras3", "ragged-one")]
    return []


@pytest.fixture(scope="module")
def fits(request, tmp_path_factory):
    """(Keras line, run) -> the run's folder: every run of the selected tests,
    made at the first request (grouped_runs.py)."""
    made = {}

    def get(line, name):
        if not made:
            wanted = grouped_runs.selected(request, _runs_of)
            runs = {f"{ln}-{n}": run for ln in {ln for ln, _ in wanted}
                    for n, run in _runs(ln).items() if (ln, n) in wanted}
            made.update(grouped_runs.launch(runs, tmp_path_factory.mktemp("fits")))
        return grouped_runs.checked(made, f"{line}-{name}")[0]

    return get


def _line(flavour):
    return "tf_keras" if "TF_USE_LEGACY_KERAS" in flavour[1] else "keras3"


def _load(folder, rank):
    return json.load(open(folder / f"rank-{rank}.json"))


@pytest.mark.parametrize("np_,speeds,sizes,data,loss_kind", UNEQUAL)
def test_unequal_slices_train_as_one_process_with_the_whole_batch(
        flavour, np_, speeds, sizes, data, loss_kind, fits):
    case = f"unequal-{np_}-{data}-{loss_kind}"
    ref = _load(fits(_line(flavour), case + "-one"), 0)
    many = fits(_line(flavour), case)
    scale = np_ if loss_kind == "sum" else 1  # the mean of the ranks' sums
    for rank in range(np_):  # every rank against the 1-process run
        got = _load(many, rank)
        assert got["sizes"] == sizes[rank], f"rank {rank} trained on slices of {got['sizes']}"
        assert len(got["loss"]) == len(ref["loss"]) == 2 * 240 // (np_ * PER_RANK_BATCH)
        np.testing.assert_allclose(np.array(got["loss"]) * scale, ref["loss"], rtol=1e-5,
                                   err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")


def test_equal_shares_deal_whole_batches_every_epoch(flavour, fits):
    # TFMPI_SHARES=equal: each rank trains on whole batches of its own (no
    # split), in every epoch (tf_keras holds arrays as one dataset of all
    # epochs: only the first epoch used to be dealt), as one process with both.
    ref = _load(fits(_line(flavour), "equal-one"), 0)
    many = fits(_line(flavour), "equal")
    for rank in range(2):
        got = _load(many, rank)
        assert got["sizes"] in ([], [0]), got["sizes"]
        assert len(got["loss"]) == len(ref["loss"]) == 12
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")


def test_sum_loss_and_train_on_batch_as_with_whole_batches(flavour, fits):
    # A "sum" loss in fit (dealt by speed, with evaluation between the epochs) and
    # then in train_on_batch on the batches a custom loop deals (each rank holds
    # a batch of its own: not split) trains the same weights as whole batches.
    whole, shares = fits(_line(flavour), "sum-whole"), fits(_line(flavour), "sum-shares")
    for rank in range(2):
        ref = _load(whole, rank)
        got = _load(shares, rank)
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


def test_ragged_data_dealt_by_speed_trains_as_one_process(fits):
    # Variable-length sequences (a RaggedTensor component): a step's batches
    # are put together ragged and cut by the shares (10 and 30 of 2 x 20),
    # and every rank trains as one process with batches of 40.
    ref = _load(fits("keras3", "ragged-one"), 0)
    many = fits("keras3", "ragged")
    assert len(ref["loss"]) == 2 * 160 // 40
    for rank in range(2):
        got = _load(many, rank)
        assert got["sizes"] == [[10], [30]][rank], f"rank {rank} trained on slices of {got['sizes']}"
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
