"""File-level sharding (tfmpirun --data-sharding files; Note [File sharding],
python/tfmpi/transparent/file_sharding.py): each rank reads only its own
files, every rank runs the same steps although the files differ in size, an
epoch still visits every record once, and each step's update is the
1-process update on the union of the ranks' batches.

The data are text files (TextLineDataset), one record "id,x1,x2,x3,x4" per
line; the script logs every id its maps parse (tf.print to a file per rank)."""

import collections
import json
import os
import sys

import numpy as np
import pytest

from mpirun_util import run
from conftest import flavour_of
from test_input_sharding import _decoded

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2", "TFMPI_SHARES": "equal"}
SIZES = [5, 30, 2, 17, 9, 1, 12]  # records per file: unequal on purpose
EPOCHS = 2


def write_files(folder, sizes, rows_seed=0):
    """Files f0..f{k-1} of `sizes` records; returns the ids each file holds."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(rows_seed)
    ids, next_id = [], 0
    for f, n in enumerate(sizes):
        with open(os.path.join(folder, f"f{f}.txt"), "w") as out:
            for line in range(n):
                values = [f"{v:.6f}" for v in rng.random(4)]
                out.write(",".join([str(next_id + line)] + values) + "\n")
        ids.append(set(range(next_id, next_id + n)))
        next_id += n
    return ids


def steps_of_a_pass(np_, batch=8):
    """Steps of a pass over SIZES under file sharding: as many as the rank with
    the most rows for its slice needs (files rank, rank + N, ...; equal shares)."""
    slice_rows = [batch // np_ + (1 if rank < batch % np_ else 0) for rank in range(np_)]
    return max(-(-sum(SIZES[rank::np_]) // slice_rows[rank]) for rank in range(np_))


SCRIPT = """
import glob, os, sys
import tensorflow as tf
work = sys.argv[1]
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
log = "file://" + os.path.join(work, f"decoded-{rank}.log")
files = sorted(glob.glob(os.path.join(work, "data", "*.txt")))

def pipeline(tag, how="list"):
    def parse(line):
        v = tf.strings.to_number(tf.strings.split(line, ","), tf.float32)
        tf.print(tag, tf.cast(v[0], tf.int64), output_stream=log)
        return v[1:5], tf.reduce_sum(v[1:5], keepdims=True)
    if how == "list":
        lines = tf.data.TextLineDataset(files)
    elif how == "shuffled":  # every rank draws the same order from the shared seed
        lines = tf.data.Dataset.list_files(os.path.join(work, "data", "*.txt"), shuffle=True).interleave(
            tf.data.TextLineDataset, cycle_length=2)
    else:
        lines = tf.data.Dataset.from_tensor_slices(files).interleave(tf.data.TextLineDataset, cycle_length=2)
    return lines.map(parse).batch(8).prefetch(2)

def plain(tag):
    def make(i):
        tf.print(tag, i, output_stream=log)
        return tf.ones([4]) * tf.cast(i, tf.float32), tf.ones([1])
    return tf.data.Dataset.range(20).map(make).batch(8)

# a transposed convolution: a rank whose files ran out gets rows gathered from the others,
# never an empty slice (which Conv1DTranspose fails on: Note [Batches smaller than the ranks])
model = keras.Sequential([keras.Input((4,)), keras.layers.Reshape((4, 1)),
                          keras.layers.Conv1DTranspose(2, 3, padding="same"),
                          keras.layers.Flatten(), keras.layers.Dense(1)])
model.compile("sgd", "mse")
history = model.fit(pipeline("fit"), epochs=2, validation_data=pipeline("val", "interleave"), verbose=0)
assert all(v == v for v in history.history["loss"]), history.history
model.evaluate(pipeline("evaluate", "interleave"), verbose=0)
assert model.predict(pipeline("predict"), verbose=0).shape == (76, 1)
model.evaluate(plain("plain"), verbose=0)
model.evaluate(pipeline("shuffled", "shuffled"), verbose=0)
steps = 0
for xb, yb in pipeline("loop"):
    steps += 1
with open(os.path.join(work, f"steps-{rank}"), "w") as f:
    f.write(str(steps))
print("TRAINED", flush=True)
"""

PASSES = {"fit": EPOCHS, "val": EPOCHS, "evaluate": 1, "predict": 1, "loop": 1, "plain": 1,
          "shuffled": 1}


@pytest.mark.parametrize("keras_line,np_", [("keras3", 2), ("keras3", 3), ("tf_keras", 2)])
def test_each_rank_reads_only_its_files(keras_line, np_, tmp_path):
    ids = write_files(tmp_path / "data", SIZES)
    total = sum(SIZES)
    prelude, env = flavour_of(keras_line)
    r = run(["tfmpirun", "-np", str(np_), "--data-sharding", "files", sys.executable, "-c",
             prelude + SCRIPT, str(tmp_path)], 300, env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    assert "TRAINED" in r.stdout
    read = _decoded(tmp_path, np_)
    for tag, passes in PASSES.items():
        union = collections.Counter()
        for rank in range(np_):
            union += read[rank][tag]
        records = 20 if tag == "plain" else total
        assert union == {i: passes for i in range(records)}, f"{tag}: {union}"
        if tag in ("predict", "plain"):  # sharded by elements: every rank a part
            assert all(0 < sum(read[rank][tag].values()) < records for rank in range(np_))
            continue
        if tag == "shuffled":  # whole files, none on two ranks (the union is checked above)
            for rank in range(np_):
                mine = set(read[rank][tag])
                assert mine and all(f <= mine or not f & mine for f in ids), rank
            continue
        for rank in range(np_):  # files rank, rank + N, ...: only those
            mine = set().union(*ids[rank::np_])
            assert set(read[rank][tag]) == mine, (tag, rank)
    # Every rank ran the same steps: as many as the rank with the most rows needs.
    steps = {int((tmp_path / f"steps-{rank}").read_text()) for rank in range(np_)}
    most = steps_of_a_pass(np_)
    assert steps == {most}, steps
    notices = [line for line in r.stdout.splitlines() if "not sharded by files" in line]
    assert len(notices) == 1 and "no file reader" in notices[0], notices


FIDELITY = """
import json, os, sys
import numpy as np, tensorflow as tf
work, files_mode, n, batch = sys.argv[1], sys.argv[2] == "files", int(sys.argv[3]), int(sys.argv[4])
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
keras.utils.set_random_seed(0)
files = [os.path.join(work, "data", f"f{i}.txt") for i in range(n)]

def parse(line):
    v = tf.strings.to_number(tf.strings.split(line, ","), tf.float32)
    return v[1:5], tf.reduce_sum(v[1:5] * [1.0, -2.0, 3.0, 0.5], keepdims=True)

if files_mode:   # rank r reads file r; each step takes batch // n rows of each
    lines = tf.data.TextLineDataset(files)
else:            # one process: the same batches, read in turn from each file
    lines = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TextLineDataset, cycle_length=n, block_length=batch // n)
data = lines.map(parse).batch(batch)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"),
                          keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.1), "mse")
losses = []
cb = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: losses.append(float(logs["loss"])))
model.fit(data, epochs=2, callbacks=[cb], verbose=0)
with open(os.path.join(work, f"result-{'files' if files_mode else 'one'}-{rank}.json"), "w") as f:
    json.dump({"losses": losses, "weights": [w.tolist() for w in model.get_weights()],
               "evaluate": float(model.evaluate(data, verbose=0))}, f)
"""


@pytest.mark.parametrize("keras_line,np_", [("keras3", 2), ("keras3", 3), ("tf_keras", 2)])
def test_each_step_is_the_one_process_step_on_the_ranks_batches(keras_line, np_, tmp_path):
    """With one file per rank of equal length and equal shares, a step's global
    batch is batch // N rows of each file in rank order: exactly the batches of
    a 1-process run that interleaves the files in blocks of batch // N."""
    batch = 4 * np_
    write_files(tmp_path / "data", [16] * np_)
    args = [str(tmp_path), "files", str(np_), str(batch)]
    prelude, env = flavour_of(keras_line)
    one = run([sys.executable, "-c", prelude + FIDELITY, str(tmp_path), "one", str(np_), str(batch)],
              300, env={**env, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_DETERMINISTIC_OPS": "1"})
    assert one.returncode == 0, one.stdout
    r = run(["tfmpirun", "-np", str(np_), "--data-sharding", "files", sys.executable, "-c",
             prelude + FIDELITY, *args], 300, env={**env, **QUIET, "TF_DETERMINISTIC_OPS": "1"})
    assert r.returncode == 0, r.stdout
    want = json.loads((tmp_path / "result-one-0.json").read_text())
    assert len(want["losses"]) == 2 * 16 // 4
    for rank in range(np_):
        got = json.loads((tmp_path / f"result-files-{rank}.json").read_text())
        np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5, err_msg=f"rank {rank}")
        for g, w in zip(got["weights"], want["weights"]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7, err_msg=f"rank {rank}")
        assert got["evaluate"] == pytest.approx(want["evaluate"], rel=1e-5), rank


def test_fewer_files_than_ranks_is_an_error_not_a_hang(tmp_path):
    write_files(tmp_path / "data", [6, 6])
    script = """
import glob, os, sys
import tensorflow as tf, keras
files = sorted(glob.glob(os.path.join(sys.argv[1], "data", "*.txt")))
data = tf.data.TextLineDataset(files).map(
    lambda l: (tf.strings.to_number(tf.strings.split(l, ","), tf.float32)[1:5], tf.ones([1]))).batch(4)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(data, verbose=0)
"""
    r = run(["tfmpirun", "-np", "3", "--data-sharding", "files", sys.executable, "-c", script,
             str(tmp_path)], 300, env=QUIET)
    assert r.returncode != 0
    assert "only has 2 file(s), which is not enough for the required 3" in r.stdout, r.stdout


EARLY_STOP = """
import json, os, sys
import numpy as np, tensorflow as tf
work = sys.argv[1]
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
log = "file://" + os.path.join(work, f"decoded-{rank}.log")
files = [os.path.join(work, "data", f"f{i}.txt") for i in range(int(sys.argv[2]))]

def pipeline(tag):
    def parse(line):
        v = tf.strings.to_number(tf.strings.split(line, ","), tf.float32)
        tf.print(tag, tf.cast(v[0], tf.int64), output_stream=log)
        return v[1:5], tf.reduce_sum(v[1:5], keepdims=True)
    return tf.data.TextLineDataset(files).map(parse).batch(8).prefetch(2)

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse")
model.fit(pipeline("fit"), epochs=2, steps_per_epoch=2, verbose=0)  # each epoch stops early
data = pipeline("loop")
for stop in (2, 1):  # two passes of a custom loop, each left by a break
    for i, (x, y) in enumerate(data):
        if i == stop:
            break
full = sum(1 for _ in pipeline("full"))  # then a whole pass
loss = float(model.evaluate(pipeline("evaluate"), steps=1, verbose=0))
with open(os.path.join(work, f"early-{rank}.json"), "w") as f:
    json.dump({"full": full, "loss": loss,
               "weights": [w.tolist() for w in model.get_weights()]}, f)
print("TRAINED", flush=True)
"""


@pytest.mark.parametrize("keras_line,np_", [("keras3", 2), ("keras3", 3), ("tf_keras", 2)])
def test_passes_stopped_early_keep_the_ranks_in_step(keras_line, np_, tmp_path):
    """Note [File sharding]: passes that the script leaves early (fit's
    steps_per_epoch, a break in a custom loop) on files of unequal sizes leave
    the ranks in step: the pass after them still visits every record once, each
    rank its own files, in the same number of steps on every rank, and the
    ranks end with the same weights and evaluation."""
    ids = write_files(tmp_path / "data", SIZES)
    prelude, env = flavour_of(keras_line)
    r = run(["tfmpirun", "-np", str(np_), "--data-sharding", "files", sys.executable, "-c",
             prelude + EARLY_STOP, str(tmp_path), str(len(SIZES))], 300, env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    got = [json.loads((tmp_path / f"early-{rank}.json").read_text()) for rank in range(np_)]
    most = steps_of_a_pass(np_)
    for rank, g in enumerate(got):
        assert g["full"] == most, (rank, g["full"], most)
        assert g["loss"] == got[0]["loss"], rank
        assert g["weights"] == got[0]["weights"], rank
    read = _decoded(tmp_path, np_)
    union = collections.Counter()
    for rank in range(np_):
        union += read[rank]["full"]
        assert set(read[rank]["full"]) == set().union(*ids[rank::np_]), rank  # its own files only
    assert union == {i: 1 for i in range(sum(SIZES))}, union  # every record once


EPOCH_SIZES = [SIZES, [12, 3, 30, 1, 20, 9, 2], [2] * 7]  # records per file, epoch by epoch

EPOCHS_SCRIPT = """
import json, os, sys
import tensorflow as tf
work, sizes = sys.argv[1], json.loads(sys.argv[2])
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
folder = os.path.join(work, f"data-{rank}")  # each rank writes its own copy: no race
os.makedirs(folder)
files = [os.path.join(folder, f"f{i}.txt") for i in range(len(sizes[0]))]

def write(epoch):  # the files' contents change between epochs, their names do not
    for name, n in zip(files, sizes[epoch]):
        with open(name, "w") as f:
            f.writelines(f"{epoch},{i % 3}.0,1.0,0.5,0.25\\n" for i in range(n))

def parse(line):
    v = tf.strings.to_number(tf.strings.split(line, ","), tf.float32)
    return v[1:5], tf.reduce_sum(v[1:5], keepdims=True)

write(0)
data = tf.data.TextLineDataset(files).map(parse).batch(8)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse")
steps = []
def begin(epoch, logs):
    steps.append(0)
def end(epoch, logs):
    if epoch + 1 < len(sizes):
        write(epoch + 1)
count = keras.callbacks.LambdaCallback(
    on_epoch_begin=begin, on_epoch_end=end,
    on_train_batch_end=lambda b, logs: steps.__setitem__(-1, steps[-1] + 1))
history = model.fit(data, epochs=len(sizes), callbacks=[count], verbose=0)
with open(os.path.join(work, f"epochs-{rank}.json"), "w") as f:
    json.dump({"steps": steps, "losses": history.history["loss"]}, f)
"""


@pytest.mark.parametrize("keras_line", ["keras3", "tf_keras"])
def test_every_epoch_runs_its_own_number_of_steps(keras_line, tmp_path):
    """A file-sharded epoch lasts as many steps as the rank with the most rows
    needs, which changes when the shares or the files change between epochs
    (here the files: 12, 16, then 2 steps). Every epoch runs to its own end
    (both Keras lines kept the step count of the first epoch: the longer second
    epoch was cut short, at 12 steps under tf_keras and 13 under Keras 3)."""
    prelude, env = flavour_of(keras_line)
    r = run(["tfmpirun", "-np", "2", "--data-sharding", "files", sys.executable, "-c",
             prelude + EPOCHS_SCRIPT, str(tmp_path), json.dumps(EPOCH_SIZES)], 300,
            env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    got = [json.loads((tmp_path / f"epochs-{rank}.json").read_text()) for rank in range(2)]
    assert got[0] == got[1]
    want = []
    for sizes in EPOCH_SIZES:  # equal shares: 4 rows of each batch of 8 per rank
        want.append(max(-(-sum(sizes[rank::2]) // 4) for rank in range(2)))
    assert want == [12, 16, 2]
    assert got[0]["steps"] == want, got[0]
    assert len(got[0]["losses"]) == len(EPOCH_SIZES), got[0]
