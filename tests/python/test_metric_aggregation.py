"""Metric states are combined over ranks by their declared aggregation (Note
[Metric state aggregation], python/tfmpi/transparent/metrics_patches.py), as
tf.distribute reads them: "sum" summed, "mean" averaged over ranks,
"only_first_replica" rank 0's. The script's own metric keeps a sum over
samples and two counts of update_state calls, one aggregated "mean" and one
"only_first_replica": each rank calls update_state once per step, as the
1-process run does, so only the declared aggregations give the 1-process
counts (summed, both would be N times as large). Its result mixes all three,
so training and validation logs, evaluate and a custom loop's result() must
match the 1-process run on every rank, with both Keras lines. Rank 0 says once
that the metric's update is the script's own; Keras' own metrics bring no such
note."""

import json
import sys

import numpy as np
import pytest

from mpirun_util import run_into

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

SCRIPT = """
import json, os, sys
import numpy as np, tensorflow as tf
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
LEGACY = not hasattr(keras, "ops")

class ErrorPerCall(keras.metrics.Metric):
    # (sum of |error| over samples) / calls + (calls counted on rank 0 - calls)
    def __init__(self, name="error_per_call", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self._state("total", "sum")
        self.calls = self._state("calls", "mean")
        self.calls_first = self._state("calls_first", "only_first_replica")

    def _state(self, name, aggregation):
        if LEGACY:
            return self.add_weight(name=name, initializer="zeros",
                                   aggregation=getattr(tf.VariableAggregation, aggregation.upper()))
        return self.add_variable(shape=(), initializer="zeros", aggregation=aggregation, name=name)

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.total.assign_add(tf.reduce_sum(tf.abs(tf.cast(y_true, "float32") - y_pred)))
        self.calls.assign_add(1.0)
        self.calls_first.assign_add(1.0)

    def result(self):
        return self.total / tf.maximum(self.calls, 1.0) + (self.calls_first - self.calls)

    def reset_state(self):
        for v in (self.total, self.calls, self.calls_first):
            v.assign(0.0)

out = sys.argv[1]
keras.utils.set_random_seed(3)
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 5)).astype("float32")
y = (x @ rng.normal(size=(5, 1))).astype("float32")
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse", metrics=[ErrorPerCall(), "mae"])
history = model.fit(x, y, batch_size=32, epochs=2, verbose=0, validation_data=(x[:40], y[:40]))
evaluated = model.evaluate(x, y, batch_size=24, verbose=0, return_dict=True)
metric = ErrorPerCall()
@tf.function
def step(xb, yb):
    metric.update_state(yb, model(xb))
for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).batch(16):
    step(xb, yb)
json.dump({"history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
           "evaluate": {k: float(v) for k, v in evaluated.items()},
           "loop": float(metric.result()), "loop_calls": float(metric.calls.numpy())},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
"""


def test_states_combine_by_their_aggregation_as_one_process(flavour, tmp_path):
    prelude, keras_env = flavour
    code = prelude + SCRIPT
    run_into([sys.executable, "-c", code], tmp_path / "one", keras_env)
    r = run_into(["tfmpirun", "-np", "2", sys.executable, "-c", code], tmp_path / "many", keras_env)
    ref = json.load(open(tmp_path / "one" / "rank-0.json"))
    assert ref["loop_calls"] == 6.0, ref  # 96 samples in batches of 16
    for rank in range(2):
        got = json.load(open(tmp_path / "many" / f"rank-{rank}.json"))
        assert sorted(got["history"]) == sorted(ref["history"]), got["history"]
        for key, values in ref["history"].items():
            np.testing.assert_allclose(got["history"][key], values, rtol=1e-5,
                                       err_msg=f"rank {rank}: {key}")
        for key, value in ref["evaluate"].items():
            np.testing.assert_allclose(got["evaluate"][key], value, rtol=1e-5,
                                       err_msg=f"rank {rank}: evaluate {key}")
        np.testing.assert_allclose(got["loop"], ref["loop"], rtol=1e-5, err_msg=f"rank {rank}")
        assert got["loop_calls"] == 6.0, f"rank {rank}: its own count of calls, {got}"
    notes = [line for line in r.stdout.splitlines() if "tfmpi: note: metric" in line]
    assert len(notes) == 1 and "'error_per_call' (ErrorPerCall)" in notes[0], r.stdout
