"""Saving and loading under tfmpirun (Notes [Rank-0 sections] and [Reading
rank 0's files]): rank 0 writes, every rank waits for the write and raises
what it raised; every load reads rank 0's files, so nothing needs a shared
filesystem; `tf.data` file caches are one per rank (Note [Cache files per
rank]). The no-shared-filesystem tests give every rank but 0 a private,
empty view of the working folder (a mount namespace with a tmpfs over it), as
on a cluster without shared storage; they need root and util-linux' unshare,
and say so when skipped. Each saving case runs with Keras 3 and with tf_keras
(the cache case with Keras 3 alone: the caches are TensorFlow's)."""

import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import FLAVOURS
from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


# (Keras line, shared filesystem): the shared case with Keras 3; the private one, which
# covers the same loads and waits without a shared filesystem, with both lines.
LAYOUTS = [("keras3", True), ("keras3", False), ("tf_keras", False)]


def _layout(name, shared):
    """(flavour, skip reason or None) for one LAYOUTS case."""
    if name == "tf_keras":
        pytest.importorskip("tf_keras", reason="tf_keras is not installed (scripts/setup.sh installs it)")
    return FLAVOURS[name], None if shared else _private_mounts_reason()


def _private_mounts_reason():
    if os.geteuid() != 0:
        return "needs root to give each rank a private mount namespace (CI runs as root)"
    if shutil.which("unshare") is None:
        return "needs util-linux' unshare"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"mount namespaces are not available here: {probe.stderr.strip()}"
    return None


PRIVATE = """#!/bin/sh
# Ranks other than 0 see an empty, private folder at $TFMPI_TEST_PRIVATE.
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
if [ "$rank" != 0 ]; then
  exec unshare -m sh -c 'mount -t tmpfs tmpfs "$0" && exec "$@"' "$TFMPI_TEST_PRIVATE" "$@"
fi
exec "$@"
"""


def tfmpirun(tmp_path, np_, code, args, env, private=None):
    argv = ["tfmpirun", "-np", str(np_)]
    if private is not None:
        wrapper = tmp_path / "private.sh"
        wrapper.write_text(PRIVATE)
        env = {**env, "TFMPI_TEST_PRIVATE": str(private)}
        argv += ["sh", str(wrapper)]
    return run(argv + [sys.executable, "-c", code] + [str(a) for a in args], 300,
               env={**QUIET, **env})


FAILING_SAVE = """
import os, sys
model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
target = os.path.join(sys.argv[1], "not-a-folder", "model.keras")  # below a file: must fail
try:
    model.save(target if hasattr(keras, "ops") else target.replace(".keras", ".h5"))
    outcome = "SAVED"
except Exception as e:
    outcome = "SAVE_FAILED " + type(e).__name__
with open(os.path.join(sys.argv[1], f"outcome-{os.getpid()}"), "w") as f:  # one file per rank
    f.write(outcome)
"""


def test_a_failing_save_raises_the_same_error_on_every_rank(flavour, tmp_path):
    (tmp_path / "not-a-folder").write_text("a file")
    r = tfmpirun(tmp_path, 3, flavour[0] + FAILING_SAVE, [tmp_path], flavour[1])
    assert r.returncode == 0, r.stdout
    outcomes = [p.read_text() for p in tmp_path.glob("outcome-*")]
    assert len(outcomes) == 3, (outcomes, r.stdout)
    assert len(set(outcomes)) == 1 and outcomes[0].startswith("SAVE_FAILED "), outcomes


SAVE_THEN_LOAD = """
import os, sys
import numpy as np
work, out = sys.argv[1], sys.argv[2]
legacy = not hasattr(keras, "ops")
x = np.random.default_rng(0).random((96, 4)).astype("float32")
keras.utils.set_random_seed(1)
def build():
    m = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
    m.compile("adam", "mse")
    return m
model = build()
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(work, "best.weights.h5" if not legacy else "best.h5"),
                                             save_weights_only=True)
model.fit(x, x[:, :2], batch_size=16, epochs=3, verbose=0, callbacks=[checkpoint])
for step in range(3):  # save repeatedly to one path, reading it back each time
    path = os.path.join(work, "model.keras" if not legacy else "model.h5")
    model.save(path)
    model = keras.models.load_model(path)
    model.fit(x, x[:, :2], batch_size=16, epochs=1, verbose=0)
again = build()
again.load_weights(os.path.join(work, "best.weights.h5" if not legacy else "best.h5"))
np.save(os.path.join(out, f"w-{os.getpid()}.npy"),
        np.concatenate([w.ravel() for w in model.get_weights() + again.get_weights()]))
with open(os.path.join(out, f"listing-{os.getpid()}"), "w") as f:  # what this rank's folder holds
    f.write(" ".join(sorted(os.listdir(work))))
"""


@pytest.mark.parametrize("name,shared", LAYOUTS)
def test_save_then_load_sees_rank0s_complete_file(name, shared, tmp_path):
    flavour, reason = _layout(name, shared)
    if reason:
        pytest.skip(reason)
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    r = tfmpirun(tmp_path, 2, flavour[0] + SAVE_THEN_LOAD, [work, out], flavour[1],
                 private=None if shared else work)
    assert r.returncode == 0, r.stdout
    weights = [np.load(p) for p in glob.glob(str(out / "w-*.npy"))]
    assert len(weights) == 2 and np.array_equal(weights[0], weights[1])
    listings = sorted(p.read_text() for p in out.glob("listing-*"))
    assert len(listings) == 2, r.stdout
    if not shared:  # the other rank loaded everything without a file of its own
        assert listings[0] == "" and listings[1] != "", listings


BACKUP = """
import os, sys
import numpy as np
backup, out, interrupt = sys.argv[1], sys.argv[2], sys.argv[3] == "interrupt"
x = np.random.default_rng(0).random((120, 4)).astype("float32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile("adam", "mse")
class Trace(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        print("EPOCH_BEGIN", epoch, flush=True)
    def on_epoch_end(self, epoch, logs=None):
        if interrupt and epoch == 1:
            raise RuntimeError("interrupted on purpose")
model.fit(x, x.sum(1, keepdims=True), batch_size=30, epochs=4, verbose=0,
          callbacks=[keras.callbacks.BackupAndRestore(backup), Trace()])
np.save(os.path.join(out, f"w-{os.getpid()}.npy"),
        np.concatenate([w.ravel() for w in model.get_weights()]))
print("FINISHED", flush=True)
"""


@pytest.mark.parametrize("name,shared", LAYOUTS)
def test_backup_and_restore_resumes_every_rank_from_rank0s_backup(name, shared, tmp_path):
    flavour, reason = _layout(name, shared)
    if reason:
        pytest.skip(reason)
    backup, out = tmp_path / "backup", tmp_path / "out"
    out.mkdir()
    private = None if shared else tmp_path / "backup"
    if private is not None:
        private.mkdir()

    def launch(mode):
        return tfmpirun(tmp_path, 2, flavour[0] + BACKUP, [backup, out, mode], flavour[1], private)

    r = launch("interrupt")
    assert r.returncode != 0 and "interrupted on purpose" in r.stdout, r.stdout
    assert backup.is_dir() and any(backup.iterdir()), "rank 0 wrote no backup"
    r = launch("resume")
    assert r.returncode == 0, r.stdout
    begun = [int(l.split()[1]) for l in r.stdout.splitlines() if l.startswith("EPOCH_BEGIN")]
    assert begun == [2, 3], r.stdout  # resumed after the two backed-up epochs, rank 0 printing
    assert not backup.exists() or not any(backup.iterdir()), "backup not removed after training"
    weights = [np.load(p) for p in glob.glob(str(out / "w-*.npy"))]
    assert len(weights) == 2 and np.array_equal(weights[0], weights[1])


CHECKPOINT = """
import os, sys
import numpy as np, tensorflow as tf
work, out = sys.argv[1], sys.argv[2]
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
optimizer = keras.optimizers.SGD(0.1)
checkpoint = tf.train.Checkpoint(model=model)
manager = tf.train.CheckpointManager(checkpoint, work, max_to_keep=2)
restored = manager.restore_or_initialize()
x = tf.ones([8, 4])
for step in range(3):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    manager.save()
np.save(os.path.join(out, f"w-{os.getpid()}-{sys.argv[3]}.npy"),
        np.concatenate([w.ravel() for w in model.get_weights()]))
print("DONE", restored is not None, flush=True)
"""


def test_checkpoint_manager_restores_rank0s_checkpoint_without_a_shared_fs(tmp_path):
    reason = _private_mounts_reason()
    if reason:
        pytest.skip(reason)
    work, out = tmp_path / "ckpts", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    for phase in ("first", "second"):
        r = tfmpirun(tmp_path, 2, "import keras\n" + CHECKPOINT, [work, out, phase], {}, work)
        assert r.returncode == 0, r.stdout
    assert "DONE True" in r.stdout  # the second run restored (rank 0 printing)
    second = [np.load(p) for p in glob.glob(str(out / "w-*-second.npy"))]
    first = [np.load(p) for p in glob.glob(str(out / "w-*-first.npy"))]
    assert len(second) == 2 and np.array_equal(second[0], second[1])
    assert not np.array_equal(second[0], first[0]), "the second run did not continue training"


CACHED = """
import json, os, sys
import numpy as np, tensorflow as tf
import keras
work, out = sys.argv[1], sys.argv[2]
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
tf.config.experimental.enable_op_determinism()
keras.utils.set_random_seed(3)
rng = np.random.default_rng(0)
x = rng.normal(size=(2000, 8)).astype("float32")
y = (x[:, :1] - 0.5 * x[:, 1:2]).astype("float32")
# A cache the whole pass writes while the ranks step together (a lock held for
# the pass), and one named by a string tensor, before the maps that the ranks
# split (Note [Sharded input]); an in-memory cache stays in memory.
first = (tf.data.Dataset.from_tensor_slices((x, y)).cache(os.path.join(work, "plain"))
         .map(lambda a, b: (a * 2.0, b)).batch(32))
second = (tf.data.Dataset.from_tensor_slices((x, y))
          .cache(tf.constant(os.path.join(work, "named"))).map(lambda a, b: (a, b + 1.0))
          .cache().batch(50))
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.01), "mse")
loss = model.fit(first, epochs=2, verbose=0).history["loss"]
loss += model.fit(second, epochs=2, verbose=0).history["loss"]
json.dump({"loss": [float(v) for v in loss], "weights": [w.tolist() for w in model.get_weights()]},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
"""


def test_dataset_file_caches_are_per_rank_and_train_as_one_process(tmp_path):
    # Ranks on one host used to write one cache file together: every rank but the
    # first failed in its first epoch on TensorFlow's cache lock (Note [Cache files
    # per rank]). A second run reads the caches the first one wrote.
    import json
    dirs = {name: tmp_path / name for name in ("work1", "one", "work2", "two", "again")}
    for d in dirs.values():
        d.mkdir()
    r = run([sys.executable, "-c", CACHED, str(dirs["work1"]), str(dirs["one"])], 300, env=QUIET)
    assert r.returncode == 0, r.stdout
    assert sorted(os.listdir(dirs["work1"])) == sorted(
        f"{c}.{part}" for c in ("plain", "named") for part in ("index", "data-00000-of-00001"))
    ref = json.load(open(dirs["one"] / "rank-0.json"))
    for out in ("two", "again"):  # writes the caches, then reads them back
        r = tfmpirun(tmp_path, 2, CACHED, [dirs["work2"], dirs[out]], {})
        assert r.returncode == 0, r.stdout
        assert r.stdout.count("tfmpi: note: Dataset.cache(") == 1, r.stdout  # rank 0, once
        for rank in (0, 1):
            got = json.load(open(dirs[out] / f"rank-{rank}.json"))
            np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
            for a, b in zip(got["weights"], ref["weights"]):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
    assert sorted(os.listdir(dirs["work2"])) == sorted(
        f"{c}.tfmpi-rank{r}-of-2.{part}" for c in ("plain", "named") for r in (0, 1)
        for part in ("index", "data-00000-of-00001"))


SAVED_MODEL = """
import os, sys
import numpy as np, tensorflow as tf
import keras
work, out = sys.argv[1], sys.argv[2]
keras.utils.set_random_seed(2)
x = np.random.default_rng(0).random((96, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1)])
model.compile("adam", "mse")
class Serving(tf.Module):
    def __init__(self, model):
        self.model = model
    @tf.function(input_signature=[tf.TensorSpec([None, 4])])
    def serve(self, x):
        return self.model(x)
outputs = []
for epoch in range(2):  # save to one path again and again, loading it back each time
    model.fit(x, x[:, :1], batch_size=16, epochs=1, verbose=0)
    tf.saved_model.save(Serving(model), os.path.join(work, "served"))
    loaded = tf.saved_model.load(os.path.join(work, "served"))  # held: its variables live with it
    outputs.append(loaded.serve(x).numpy())
model.export(os.path.join(work, "exported"), verbose=False)  # Keras' export saves a SavedModel
outputs.append(np.asarray(keras.layers.TFSMLayer(os.path.join(work, "exported"),
                                                 call_endpoint="serve")(x)))
writer = tf.summary.create_file_writer(os.path.join(work, "logs"))
with writer.as_default():
    for step in range(3):
        tf.summary.write("loss", tf.constant(0.5 * step), step=step)
writer.flush()
np.save(os.path.join(out, f"w-{os.getpid()}.npy"),
        np.concatenate([np.ravel(model.predict(x, verbose=0))] + [o.ravel() for o in outputs]))
with open(os.path.join(out, f"listing-{os.getpid()}"), "w") as f:  # what this rank's folder holds
    f.write(" ".join(sorted(os.listdir(work))))
"""


@pytest.mark.parametrize("shared", [True, False])
def test_saved_models_and_summaries_are_rank0s(shared, tmp_path):
    # tf.saved_model.save is rank 0's write and load reads rank 0's copy, also where the
    # other rank has no shared filesystem (Keras' export and TFSMLayer go through them); summary writers write on rank 0 only, so the
    # log folder holds one event file, not one per rank.
    _, reason = _layout("keras3", shared)
    if reason:
        pytest.skip(reason)
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    r = tfmpirun(tmp_path, 2, SAVED_MODEL, [work, out], {}, private=None if shared else work)
    assert r.returncode == 0, r.stdout
    got = [np.load(p) for p in glob.glob(str(out / "w-*.npy"))]
    assert len(got) == 2, r.stdout
    for values in got:  # each load gives what the model computed when it was saved
        predicted, first, second, exported = np.split(values, 4)
        np.testing.assert_allclose(second, predicted, rtol=1e-6)
        np.testing.assert_allclose(exported, predicted, rtol=1e-6)
        assert not np.allclose(first, second)  # the second save replaced the first
    np.testing.assert_array_equal(got[0], got[1])
    assert len(list((work / "logs").glob("events.out.tfevents.*"))) == 1
    listings = sorted(p.read_text() for p in out.glob("listing-*"))
    if not shared:  # the other rank wrote nothing and loaded rank 0's SavedModel
        assert listings == ["", "exported logs served"], listings
