"""Transparent mode at the edges: uneven data, refused set-ups, XLA, rank-0
side effects, per-rank batch mode (exact evaluation metrics), predict,
notices about random draws that cannot be exact. Each case is a small plain script
run by tfmpirun (with a timeout: a hang fails the test); the Keras cases run
with Keras 3 and with tf_keras (TF_USE_LEGACY_KERAS=1), the script getting
its Keras as a user's would (`import keras`, or `tf.keras`)."""

import glob
import sys

import numpy as np
import pytest

import grouped_runs
from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def script(flavour, body):
    return flavour[0] + body


def tfmpirun(np_, code, *flags, timeout=300, env=None):
    return run(["tfmpirun", "-np", str(np_), *flags, sys.executable, "-c", code], timeout,
               env={**QUIET, **(env or {})})


UNEVEN = """
import os
import numpy as np, tensorflow as tf
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
x = np.ones((64 * (2 + rank), 4), np.float32)          # rank 1 has more data
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, x[:, :1], batch_size=64, epochs=1, verbose=0)
"""


def test_rank_with_more_data_fails_clearly_instead_of_hanging(flavour):
    # Rank 0 reaches the end of the epoch while rank 1 runs a third step: each
    # waits for collectives the other never submits, and the engine says so
    # (with the default TFMPI_STALL_TIMEOUT_SECONDS; the run's timeout is the bound).
    r = tfmpirun(2, script(flavour, UNEVEN), timeout=120, env=flavour[1])
    assert r.returncode != 0
    assert "ran different sequences of collectives" in r.stdout, r.stdout
    assert "Every rank must see the same number of batches" in r.stdout


RAISES = """
import os
import numpy as np
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
class Fails(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if rank == 1 and batch == 2:
            raise ValueError("the data loader of rank 1 failed")
x = np.ones((640, 4), np.float32)
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, x[:, :1], batch_size=64, epochs=3, verbose=0, callbacks=[Fails()])
print("TRAINED", flush=True)
"""


def test_a_rank_that_raises_stops_every_rank_with_its_error(flavour):
    r = tfmpirun(2, script(flavour, RAISES), timeout=90, env=flavour[1])
    assert r.returncode != 0
    assert "TRAINED" not in r.stdout
    assert "rank 1 stopped with an error: ValueError: the data loader of rank 1 failed" \
        in r.stdout, r.stdout


STRATEGY = """
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
"""


def test_tf_distribute_strategy_is_refused():
    r = tfmpirun(2, STRATEGY)
    assert r.returncode != 0
    assert "creates a tf.distribute.MirroredStrategy" in r.stdout, r.stdout


OLD_TF = """
import sys
sys.path.insert(0, sys.argv[1])
import tensorflow
print("IMPORTED", tensorflow.__version__, flush=True)
"""


def test_tensorflow_older_than_2_16_is_refused(tmp_path):
    # A stand-in `tensorflow` package that reports 2.15 (an old wheel cannot be
    # installed next to the real one): importing it under tfmpirun must stop the
    # script with the reason before it can train unsynchronised.
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text('__version__ = "2.15.1"\n')
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", OLD_TF, str(tmp_path)], 120, env=QUIET)
    assert r.returncode == 2, r.stdout
    assert "transparent mode is tested with tensorflow 2.21, and this is tensorflow 2.15.1" \
        in r.stdout, r.stdout
    assert "TFMPI_ALLOW_UNTESTED_VERSIONS=1" in r.stdout, r.stdout
    assert "IMPORTED" not in r.stdout, r.stdout


XLA_AND_SAVE = """
import os, sys
import numpy as np
out = sys.argv[1]
x = np.random.default_rng(0).random((96, 4)).astype("float32")
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse", jit_compile=True)
model.fit(x, x.sum(1, keepdims=True), batch_size=32, epochs=2, verbose=0)
model.save(os.path.join(out, f"model-{os.getpid()}.keras"))
print("TRAINED", flush=True)
"""


def test_xla_is_turned_off_with_notice_and_save_happens_once(flavour, tmp_path):
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", script(flavour, XLA_AND_SAVE),
             str(tmp_path)], 300, env={**QUIET, **flavour[1]})
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("XLA compilation (jit_compile) is turned off") == 1
    assert r.stdout.count("TRAINED") == 1
    assert len(glob.glob(str(tmp_path / "model-*.keras"))) == 1


PER_RANK = """
import numpy as np
x = np.ones((23 * 10, 4), np.float32)                  # 23 batches of 10
seen = []
class Count(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        seen.append(self.params["steps"])
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, x[:, :1], batch_size=10, epochs=2, verbose=0, callbacks=[Count()])
print("STEPS", seen, flush=True)
"""


@pytest.mark.parametrize("mode,np_,steps", [("global", 2, 23), ("per-rank", 2, 11),
                                            ("per-rank", 3, 7)])
def test_batch_modes_steps_per_epoch(flavour, mode, np_, steps):
    r = tfmpirun(np_, script(flavour, PER_RANK), "--batch-mode", mode, env=flavour[1])
    assert r.returncode == 0, r.stdout
    assert f"STEPS [{steps}, {steps}]" in r.stdout, r.stdout


# Scripts that must train under tfmpirun as they do in one process
# (scripts/as_one_process/, each writing rank-R.json into argv[1]): test ->
# (script, ranks). Per Keras line they run in turn, one tfmpirun per rank count,
# and their 1-process runs in one process (scripts/run_in_turn.py): starting a
# process costs more than such a run.
AS_ONE_PROCESS = {
    "test_a_model_built_by_its_first_call_trains_as_one_process": ("deferred", 2),
    "test_train_on_batch_after_fit_trains_as_one_process": ("fit_then_batch", 2),
    "test_steps_per_execution_and_validation_split_train_as_one_process": ("multi_step", 2),
    "test_sequences_and_generators_train_as_one_process": ("generated", 2),
    "test_preprocessing_layers_adapt_to_the_whole_data": ("adapted", 3),
    "test_an_iterator_read_inside_a_function_is_split": ("function_reads", 3),
    "test_predict_returns_the_whole_result_in_order": ("predict", 3),
}


def _runs_of(item):
    name = getattr(item, "originalname", None)
    if name not in AS_ONE_PROCESS:
        return []
    line, script = item.callspec.params["flavour"], AS_ONE_PROCESS[name][0]
    return [f"{line}-{script}", f"{line}-{script}-one"]


@pytest.fixture(scope="module")
def as_one_process(request, tmp_path_factory):
    """(flavour, script) -> (folder of the 1-process run, folder of the ranks'
    files). Every run of the selected tests is made at the first request
    (grouped_runs.py)."""
    made = {}

    def get(flavour, name):
        if not made:
            runs, ranks = {}, dict(AS_ONE_PROCESS.values())
            for run in grouped_runs.selected(request, _runs_of):
                line, _, script = run.removesuffix("-one").partition("-")
                env = {"TF_USE_LEGACY_KERAS": "1"} if line == "tf_keras" else {}
                launcher = () if run.endswith("-one") else ("tfmpirun", "-np", str(ranks[script]))
                runs[run] = grouped_runs.Run(launcher, env,
                                             [f"scripts/as_one_process/{script}.py"])
            made.update(grouped_runs.launch(runs, tmp_path_factory.mktemp("as-one-process")))
        run = f"{_line(flavour)}-{name}"
        return grouped_runs.checked(made, run + "-one")[0], grouped_runs.checked(made, run)[0]

    return get


def _trains_as_one_process(flavour, name, as_one_process):
    """Script `name` (writing {"loss": [...], "weights": [...]} to rank-R.json)
    under tfmpirun gives every rank the 1-process run's losses and weights.
    Returns what the 1-process run and each rank wrote."""
    import json
    one, many = as_one_process(flavour, name)
    ref = json.load(open(one / "rank-0.json"))
    ranks = [json.load(open(p)) for p in sorted(many.glob("rank-*.json"))]
    assert len(ranks) == dict(AS_ONE_PROCESS.values())[name], ranks
    for rank, got in enumerate(ranks):  # every rank against the 1-process run
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        for a, b in zip(got["weights"], ref["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
    return ref, ranks


def _line(flavour):
    return "tf_keras" if "TF_USE_LEGACY_KERAS" in flavour[1] else "keras3"


def test_a_model_built_by_its_first_call_trains_as_one_process(flavour, as_one_process):
    # No input shape: the weights are created inside the first training step, after
    # fit made its train function (tf_keras' model.variables raises until then)
    _trains_as_one_process(flavour, "deferred", as_one_process)


def test_train_on_batch_after_fit_trains_as_one_process(flavour, as_one_process):
    # train_on_batch traces fit's train function again; the batch check's counter
    # for it used to be created inside that trace, which tf.function refuses.
    _trains_as_one_process(flavour, "fit_then_batch", as_one_process)


def test_steps_per_execution_and_validation_split_train_as_one_process(flavour, as_one_process):
    # Three steps per call of the train function, each split over the ranks (144
    # training rows in batches of 32: calls of 3 and 2 steps, a ragged last batch),
    # the last quarter of the arrays held out by Keras before it shuffles, Dropout.
    _trains_as_one_process(flavour, "multi_step", as_one_process)


def test_sequences_and_generators_train_as_one_process(flavour, as_one_process):
    # A Sequence (Keras 3's PyDataset) with a ragged last batch, then an endless
    # Python generator with steps_per_epoch (epochs cut across its passes): every
    # rank draws each whole batch and the step splits it.
    _trains_as_one_process(flavour, "generated", as_one_process)


def test_preprocessing_layers_adapt_to_the_whole_data(flavour, as_one_process):
    # adapt iterates a tf.data dataset, which custom-loop slicing used to cut: every
    # rank learnt its own mean and vocabulary (Keras 3), or adapt failed (tf_keras).
    # The Normalization layer's mean and variance are among the model's weights.
    _trains_as_one_process(flavour, "adapted", as_one_process)


def test_an_iterator_read_inside_a_function_is_split(flavour, as_one_process):
    # The iterator is made eagerly and read by next() inside tf.functions (passed as an
    # argument, and closed over in a while loop): it used to fail in the batch check;
    # now each call takes this rank's slice of the next batch (Note [Iterators read in a
    # function]), 32 rows cut 11 + 11 + 10 over 3 ranks.
    ref, ranks = _trains_as_one_process(flavour, "function_reads", as_one_process)
    assert [got["rows"] for got in ranks] == [176, 176, 160], ranks
    assert ref["rows"] == 512


def test_predict_returns_the_whole_result_in_order(flavour, as_one_process):
    one, many = as_one_process(flavour, "predict")
    ref = np.load(one / "predict-0.npy")
    ranks = sorted(many.glob("predict-*.npy"))
    assert len(ranks) == 3, ranks
    for path in ranks:
        np.testing.assert_allclose(np.load(path), ref, rtol=1e-6, err_msg=path.name)


CONFIGURE_AFTER_IMPORT = """
import keras, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)   # needs an uninitialised runtime
tf.config.threading.set_inter_op_parallelism_threads(1)
print("CONFIGURED", flush=True)
"""


def test_script_can_configure_tensorflow_after_importing_it():
    r = tfmpirun(2, CONFIGURE_AFTER_IMPORT)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("CONFIGURED") == 1


STEP_OPS = """
import numpy as np
from tensorflow.python.eager import context
x = np.random.default_rng(0).random((64, 4)).astype("float32")
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile("adam", "mse", metrics=["mae"])
model.fit(x, x[:, :1], batch_size=16, epochs=1, verbose=0)
model.evaluate(x, x[:, :1], verbose=0)
ctx = context.context()
ops = {n.op for f in ctx.list_function_names() for n in ctx.get_function_def(f).node_def}
print("TFMPI_OPS", sorted(o for o in ops if o.startswith("Tfmpi")), flush=True)
"""


@pytest.mark.parametrize("np_", [1, 2])
def test_one_rank_compiles_the_plain_step(flavour, np_):
    # At one rank every patch that communicates steps aside: the functions Keras
    # traces hold no tfmpi collective, only (Keras 3) the fused Adam update that
    # replaces Keras' own ops (TFMPI_FUSED_UPDATES, test_fused_updates.py).
    r = tfmpirun(np_, script(flavour, STEP_OPS), env=flavour[1])
    assert r.returncode == 0, r.stdout
    line = next(l for l in r.stdout.splitlines() if l.startswith("TFMPI_OPS"))
    if np_ == 1:
        keras3 = "TF_USE_LEGACY_KERAS" not in flavour[1]
        fused = "['TfmpiApplyAdam']" if keras3 else "[]"
        assert line == f"TFMPI_OPS {fused}", line
    else:
        assert "TfmpiGroupedAllreduce" in line, line


PER_RANK_LOOP = """
import os, sys
import numpy as np, tensorflow as tf
out = sys.argv[1]
x = np.arange(23 * 10, dtype=np.float32).reshape(-1, 1)    # 23 batches of 10; value = index
dataset = tf.data.Dataset.from_tensor_slices((x, 2 * x)).batch(10)
model = keras.Sequential([keras.Input(shape=(1,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(1e-6)
firsts = []
for xb, yb in dataset:
    firsts.append(float(xb[0, 0]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb) - yb) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
np.save(os.path.join(out, f"firsts-{os.getpid()}.npy"), np.array(firsts))
np.save(os.path.join(out, f"w-{os.getpid()}.npy"),
        np.concatenate([w.ravel() for w in model.get_weights()]))
"""


@pytest.mark.parametrize("np_", [2, 3])
def test_per_rank_mode_deals_custom_loop_batches(flavour, np_, tmp_path):
    r = run(["tfmpirun", "-np", str(np_), "--batch-mode", "per-rank", sys.executable, "-c",
             script(flavour, PER_RANK_LOOP), str(tmp_path)], 300, env={**QUIET, **flavour[1]})
    assert r.returncode == 0, r.stdout
    firsts = [set(np.load(p).tolist()) for p in glob.glob(str(tmp_path / "firsts-*.npy"))]
    assert len(firsts) == np_
    assert all(len(f) == 23 // np_ for f in firsts), firsts      # same step count everywhere
    union = set().union(*firsts)
    assert len(union) == np_ * (23 // np_), "ranks shared a batch"
    assert union <= {10.0 * b for b in range(23)}
    weights = [np.load(p) for p in glob.glob(str(tmp_path / "w-*.npy"))]
    assert all(np.array_equal(w, weights[0]) for w in weights)


PER_RANK_METRICS = """
import sys
import numpy as np
keras.utils.set_random_seed(3)
x = np.random.default_rng(0).random((203, 5)).astype("float32")
y = (x[:, 0] + x[:, 1] > 1).astype("float32")[:, None]
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile("sgd", "binary_crossentropy",
              metrics=[keras.metrics.TruePositives(name="tp"), keras.metrics.FalseNegatives(name="fn"),
                       keras.metrics.BinaryAccuracy(name="acc")])
before = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
history = model.fit(x, y, batch_size=16, epochs=1, verbose=0, validation_data=(x, y))
after = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
predicted = model.predict(x, batch_size=16, verbose=0) > 0.5
print("BEFORE", " ".join(f"{k}={before[k]:.6f}" for k in ("tp", "fn", "acc")), flush=True)
print("VAL", " ".join(f"{k}={history.history['val_' + k][-1]:.6f}" for k in ("tp", "fn", "acc")),
      flush=True)
print("AFTER", " ".join(f"{k}={after[k]:.6f}" for k in ("tp", "fn", "acc")), flush=True)
print("COUNTED", int((predicted & (y > 0.5)).sum()), int((~predicted & (y > 0.5)).sum()), flush=True)
"""


def _fields(stdout, tag):
    line = next(l for l in stdout.splitlines() if l.startswith(tag))
    return line.split()[1:]


def test_per_rank_mode_counts_every_evaluation_sample_once(flavour):
    code = script(flavour, PER_RANK_METRICS)
    ref = run([sys.executable, "-c", code], 120, env={**QUIET, **flavour[1]})
    assert ref.returncode == 0, ref.stdout
    r = tfmpirun(3, code, "--batch-mode", "per-rank", env=flavour[1])
    assert r.returncode == 0, r.stdout
    # before training the model is the 1-process model: evaluation must match it exactly
    assert _fields(r.stdout, "BEFORE") == _fields(ref.stdout, "BEFORE"), (r.stdout, ref.stdout)
    # after training (per-rank batches: other weights), counts agree with the model's predictions
    tp, fn = _fields(r.stdout, "COUNTED")
    after = dict(f.split("=") for f in _fields(r.stdout, "AFTER"))
    assert float(after["tp"]) == float(tp) and float(after["fn"]) == float(fn), r.stdout
    assert _fields(r.stdout, "VAL") == _fields(r.stdout, "AFTER"), r.stdout


CONV_EQUAL = """
import numpy as np
x = np.random.default_rng(0).random((64, 8, 8, 1)).astype("float32")
y = np.arange(64) % 10
model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, padding="same"),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=1, verbose=0)
print("TRAINED", flush=True)
"""


@pytest.mark.parametrize("np_", [2, 4])
def test_a_conv_model_trains_on_slices_of_static_size(flavour, np_):
    # With equal shares and a batch the ranks divide, every slice has a size
    # known when the step is traced. A guard around convolutions for empty
    # slices (since replaced: Note [Batches smaller than the ranks]) once gave
    # the model's output 0 rows there.
    r = tfmpirun(np_, script(flavour, CONV_EQUAL), env={"TFMPI_SHARES": "equal", **flavour[1]})
    assert r.returncode == 0, r.stdout
    assert "TRAINED" in r.stdout
