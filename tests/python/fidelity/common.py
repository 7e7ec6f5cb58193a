"""Shared by the fidelity training scripts (plain TensorFlow/Keras; they never
import tfmpi). Every process writes its own files, named by PID, so the test
can tell which ranks wrote what: run-<pid>.json (per-step losses, the bound of
their recovery error, evaluation results) and weights-<pid>.npy (the final
weights, as raw bytes)."""

import json
import os
import sys

import numpy as np

# The scripts train with Keras 3, or with tf_keras when TensorFlow is asked for
# it (TF_USE_LEGACY_KERAS=1), as a user's script would see it through tf.keras.
LEGACY = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true")
if LEGACY:
    import tensorflow as tf

    keras = tf.keras
else:
    import keras

_evaluation = []
_run = {"losses": [], "bounds": [], "extra": [], "models": []}
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def setup_determinism():
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()


def optimizer(adaptive):
    """The script's Adam or RMSprop, or, where FIDELITY_SGD is set, plain SGD
    at that learning rate in its place. Adam and RMSprop normalise their step,
    so a wrong gradient scale (a sum of the ranks' gradients in place of their
    mean) trains the same with them; SGD's step is the gradient times the
    rate, so the kind's SGD variant sees it."""
    rate = os.environ.get("FIDELITY_SGD")
    if not rate:
        return adaptive
    legacy = "legacy" in type(adaptive).__module__
    return (keras.optimizers.legacy.SGD if legacy else keras.optimizers.SGD)(float(rate))


def digits():
    """scikit-learn's digits: from the file tests/conftest.py wrote (the test
    tiers hide scikit-learn from the processes they start, tests/lean_site),
    or from scikit-learn where a script runs on its own."""
    if os.environ.get("TESTS_DIGITS_FILE"):
        with np.load(os.environ["TESTS_DIGITS_FILE"]) as f:
            x, y = f["x"], f["y"]
    else:
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int32")


def out_dir():
    return sys.argv[1]


def batch_sizes(n, batch):
    """The sizes of an epoch's batches of `batch` over `n` samples."""
    return [batch] * (n // batch) + ([n % batch] if n % batch else [])


def evaluate(model, x, y=None, **kwargs):
    """model.evaluate, printed and kept for write_run."""
    values = model.evaluate(x, y, verbose=0, **kwargs)
    values = [float(v) for v in np.atleast_1d(values)]
    _evaluation.extend(values)
    print("EVAL " + " ".join(f"{v:.8f}" for v in values), flush=True)


def collect(losses, model, bounds=None, extra=None):
    """Keep one training's per-step losses (with their recovery bounds), its
    model (for the final weights) and extra values, for write_run."""
    _run["losses"] += [float(v) for v in losses]
    _run["bounds"] += [0.0] * len(losses) if bounds is None else [float(b) for b in bounds]
    _run["extra"] += [float(v) for v in (extra or [])]
    _run["models"].append(model)


def write_run(losses=None, model=None, bounds=None, extra=None):
    """Write what was collected (plus this last training, if given)."""
    if model is not None:
        collect(losses, model, bounds, extra)
    pid = os.getpid()
    run = {"losses": _run["losses"], "bounds": _run["bounds"], "eval": _evaluation,
           "extra": _run["extra"]}
    with open(os.path.join(out_dir(), f"run-{pid}.json"), "w") as f:
        json.dump(run, f)
    weights = [np.asarray(w) for m in _run["models"] for w in m.get_weights()]
    np.save(os.path.join(out_dir(), f"weights-{pid}.npy"),
            np.concatenate([w.ravel().view(np.uint8) for w in weights]))
    np.save(os.path.join(out_dir(), f"values-{pid}.npy"),
            np.concatenate([w.astype(np.float64).ravel() for w in weights]))
    print("RUN_DONE", flush=True)


class RecordLoss(keras.callbacks.Callback):
    """Every training step's own loss, recovered from Keras' running mean.

    logs["loss"] after step k is the mean of the losses so far, weighted by
    batch size: m_k = (sum_j b_j l_j) / n_k. So l_k = (m_k n_k - m_{k-1}
    n_{k-1}) / b_k, whose error from the float32 rounding of the two means is
    at most `bound` = 2 eps (|m_k| n_k + |m_{k-1}| n_{k-1}) / b_k. `sizes` are
    the weights of one epoch's steps (batch sizes; [1] for a tracker updated
    once per step); `keys` the logs to recover (each step appends one value
    per key). Also prints each epoch's logs."""

    def __init__(self, sizes, keys=("loss",)):
        super().__init__()
        self.sizes, self.keys = sizes, keys
        self.losses, self.bounds = [], []
        self._previous = {}

    def on_epoch_begin(self, epoch, logs=None):
        self._previous = {}

    def on_train_batch_end(self, batch, logs=None):
        b = self.sizes[batch % len(self.sizes)]
        for key in self.keys:
            mean, seen = self._previous.get(key, (0.0, 0))
            now = float(logs[key])
            total = seen + b
            self.losses.append((now * total - mean * seen) / b)
            self.bounds.append(2 * FLOAT32_EPS * (abs(now) * total + abs(mean) * seen) / b)
            self._previous[key] = (now, total)

    def on_epoch_end(self, epoch, logs=None):
        values = " ".join(f"{k}={v:.8f}" for k, v in sorted(logs.items()))
        print(f"EPOCH {epoch} {values}", flush=True)
