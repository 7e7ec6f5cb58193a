"""Every rank must see the same global batches (Note [Batch agreement],
python/tfmpi/transparent/batch_check.py). Each test makes one of the usual
causes of disagreement happen in a plain script under tfmpirun and expects
every rank to stop within the first epoch with a message naming the step, the
ranks and the likely causes; never a hang, never silently wrong training.
The scripts read the rank from MPI's environment only to emulate what differs
between hosts (a slow disk, a directory listing order)."""

import sys

import pytest

from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

PIPELINES = """
import os, sys
import numpy as np, tensorflow as tf, keras
cause, where, work = sys.argv[1], sys.argv[2], sys.argv[3]
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
x = np.random.default_rng(0).random((512, 4)).astype("float32")
y = x.sum(1, keepdims=True)
if cause == "nondeterministic":
    from tensorflow.python.data.experimental.ops import testing
    even, odd = tf.data.Dataset.range(0, 512, 2), tf.data.Dataset.range(1, 512, 2)
    if rank % 2:  # this host is slow on other records than the other host
        even = even.apply(testing.sleep(20000))
    else:
        odd = odd.apply(testing.sleep(20000))
    parts = tf.data.Dataset.from_tensors(even).concatenate(tf.data.Dataset.from_tensors(odd))
    index = parts.interleave(lambda part: part, cycle_length=2, num_parallel_calls=2,
                             deterministic=False)
    dataset = index.map(lambda i: (tf.gather(x, i), tf.gather(y, i))).batch(32)
elif cause == "file_order":
    work = os.path.join(work, f"host-{rank}")  # each host its own copy: no rank reads a
    os.makedirs(work)                           # file another rank is still writing
    for k in range(4):  # four shards, the same files on every host
        np.save(os.path.join(work, f"shard-{k}.npy"), np.concatenate([x, y], 1)[k * 128:(k + 1) * 128])
    names = os.listdir(work)  # unsorted: on another host the listing order differs
    names = sorted(names, reverse=bool(rank % 2))
    data = np.concatenate([np.load(os.path.join(work, n)) for n in names])
    dataset = tf.data.Dataset.from_tensor_slices((data[:, :4], data[:, 4:])).batch(32)
elif cause == "unseeded":
    order = np.random.default_rng().permutation(512)  # entropy from the OS: differs per process
    dataset = tf.data.Dataset.from_tensor_slices((x[order], y[order])).batch(32)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
if where == "fit":
    model.fit(dataset, epochs=2, verbose=0)
else:
    optimizer = keras.optimizers.SGD(0.01)
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    if where == "loop":
        for xb, yb in dataset:
            step(xb, yb)
    else:  # the iterator made eagerly, read inside a tf.function
        iterator = iter(dataset)
        function = tf.function(lambda: step(*next(iterator)))
        for _ in range(16):
            function()
print("TRAINED", flush=True)
"""


@pytest.mark.parametrize("cause,where", [("nondeterministic", "fit"), ("file_order", "fit"),
                                         ("unseeded", "fit"), ("unseeded", "loop"),
                                         ("unseeded", "function")])
def test_ranks_reading_different_batches_stop_in_the_first_epoch(cause, where, tmp_path):
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", PIPELINES, cause, where, str(tmp_path)],
            240, env=QUIET)
    assert r.returncode != 0, r.stdout
    assert "TRAINED" not in r.stdout
    assert "BatchMismatchError" in r.stdout, r.stdout
    assert "ranks [1] drew a different batch from rank 0" in r.stdout, r.stdout
    if where == "fit":
        assert "fit, epoch 1, step " in r.stdout, r.stdout
    elif where == "loop":
        assert "custom loop's pass over its dataset, step " in r.stdout, r.stdout
    else:
        assert "in a tf.function of a custom loop, pass 1, step " in r.stdout, r.stdout
    assert "deterministic=False" in r.stdout and "sort the file list" in r.stdout


def test_the_check_can_be_turned_off(tmp_path):
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", PIPELINES, "unseeded", "fit",
             str(tmp_path)], 240, env={**QUIET, "TFMPI_BATCH_CHECK_INTERVAL": "0"})
    assert r.returncode == 0, r.stdout
    assert "TRAINED" in r.stdout


def test_an_invalid_interval_is_refused(tmp_path):
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", "print('RAN')"], 120,
            env={**QUIET, "TFMPI_BATCH_CHECK_INTERVAL": "often"})
    assert r.returncode != 0
    assert "invalid value 'often' for TFMPI_BATCH_CHECK_INTERVAL" in r.stdout, r.stdout
