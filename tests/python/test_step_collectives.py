"""The collectives of a training step: Keras' own train and test steps run no
loss collective (Note [Local losses in Keras' own steps], steps.py), their
train steps sum the metric states in the gradients' collective (Note [One
collective per step], keras_step.py, legacy_keras/train_step.py), and what
they report stays the 1-process value: the loss, each output's loss of a
multi-output model, the metrics, with a regularizer, loss weights and a ragged
last batch, on every rank, with live and with equal work shares."""

import json
import os
import sys

import numpy as np
import pytest

from conftest import flavour_of
from mpirun_util import run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

MULTI_OUTPUT = """
import json, os, sys
import numpy as np
keras.utils.set_random_seed(3)
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
rng = np.random.default_rng(0)
x = rng.normal(size=(203, 8)).astype("float32")          # 203: a ragged last batch
ya = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
yb = x[:, 2:3] * 0.5 + 0.1
inp = keras.Input((8,))
h = keras.layers.Dense(16, activation="relu",
                       kernel_regularizer=keras.regularizers.L2(1e-3))(inp)
model = keras.Model(inp, {"a": keras.layers.Dense(3, name="a")(h),
                          "b": keras.layers.Dense(1, name="b")(h)})
model.compile(keras.optimizers.SGD(0.05),
              loss={"a": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    "b": keras.losses.MeanSquaredError()},
              loss_weights={"a": 1.0, "b": 0.5}, metrics={"a": ["accuracy"]})
history = model.fit(x, {"a": ya, "b": yb}, batch_size=32, epochs=2, shuffle=False,
                    verbose=0).history
evaluated = model.evaluate(x, {"a": ya, "b": yb}, batch_size=48, verbose=0, return_dict=True)
with open(os.path.join(sys.argv[1], f"result-{rank}.json"), "w") as f:
    json.dump({"history": {k: [float(v) for v in vs] for k, vs in history.items()},
               "evaluate": {k: float(v) for k, v in evaluated.items()}}, f)
"""

RTOL = 1e-5


def _launch(np_, code, out, env):
    out.mkdir()
    argv = [sys.executable, "-c", code, str(out)]
    if np_ > 1:
        argv = ["tfmpirun", "-np", str(np_)] + argv
    r = run(argv, 300, env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    results = {}
    for name in sorted(os.listdir(out)):
        if name.startswith("result-"):
            with open(out / name) as f:
                results[name] = json.load(f)
    return results


def _assert_close(got, ref, where):
    assert sorted(got) == sorted(ref), where
    for key in ref:
        np.testing.assert_allclose(got[key], ref[key], rtol=RTOL, err_msg=f"{where}: {key}")


# Keras 3 at both kinds of shares; tf_keras (no per-output special case) with unequal ones
@pytest.mark.parametrize("keras_line,np_,shares",
                         [("keras3", 2, "equal"), ("keras3", 3, "live"), ("tf_keras", 3, "live")])
def test_keras_own_steps_report_the_one_process_losses_without_a_loss_collective(
        keras_line, np_, shares, tmp_path):
    prelude, env = flavour_of(keras_line)
    code = prelude + MULTI_OUTPUT
    (ref,) = _launch(1, code, tmp_path / "one", env).values()
    timeline = tmp_path / "timeline.json"
    run_env = {**env, "TFMPI_TIMELINE": str(timeline)}
    if shares == "equal":
        run_env["TFMPI_SHARES"] = "equal"
    else:  # unequal live shares: slices have sizes known only at run time
        run_env.update({"TFMPI_PROBE_SPEEDS": "1,0.6,0.3", "TFMPI_REBALANCE_STEPS": "0"})
    got = _launch(np_, code, tmp_path / "many", run_env)
    assert len(got) == np_, list(got)
    for name, result in got.items():
        for key in ("history", "evaluate"):
            _assert_close(result[key], ref[key], f"{name} {key}")
    with open(timeline) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["args"]["name"] for e in events if "name" in e.get("args", {})}
    assert any(n.startswith("tfmpi/grad/") for n in names), sorted(names)
    assert not [n for n in names if n.startswith("tfmpi/loss/")], sorted(names)
    # The gradients' grouped op: the model's 6 weights and the 8 metric states riding
    # with them (the loss, two outputs' losses and the accuracy: a total and a count each)
    group = {int(n.rsplit("/", 1)[1]) for n in names if n.startswith("tfmpi/grad/")}
    assert group == set(range(6 + 8)), sorted(names)


OWN_RESULTS = """
import json, os, sys
import numpy as np
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
keras.utils.set_random_seed(5)
class Model(keras.Model):
    def get_metrics_result(self):  # the script reads its results its own way
        logs = dict(super().get_metrics_result())
        logs["read_by_the_script"] = logs["loss"] * 0 + 1
        return logs
inp = keras.Input((4,))
model = Model(inp, keras.layers.Dense(1)(inp))
model.compile(keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
x = np.random.default_rng(0).normal(size=(96, 4)).astype("float32")
history = model.fit(x, x[:, :1], batch_size=32, epochs=2, shuffle=False, verbose=0).history
with open(os.path.join(sys.argv[1], f"result-{rank}.json"), "w") as f:
    json.dump({"history": {k: [float(v) for v in vs] for k, vs in history.items()}}, f)
"""


def test_a_get_metrics_result_of_the_script_still_makes_the_logs(flavour, tmp_path):
    # The one-collective step reads the results itself; a model whose class overrides
    # get_metrics_result keeps Keras' step, so the override's logs reach the history.
    prelude, env = flavour
    code = prelude + OWN_RESULTS
    (ref,) = _launch(1, code, tmp_path / "one", env).values()
    assert ref["history"]["read_by_the_script"] == [1.0, 1.0], ref
    got = _launch(2, code, tmp_path / "many", env)
    assert len(got) == 2, list(got)
    for name, result in got.items():
        _assert_close(result["history"], ref["history"], f"{name} history")
