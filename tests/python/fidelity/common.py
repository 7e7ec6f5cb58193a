"""Shared by the fidelity training scripts (plain TensorFlow/Keras; they never
import tfmpi). Every process writes its own files, named by PID, so the test
can tell which ranks wrote what."""

import json
import os
import sys

import numpy as np

# The scripts train with Keras 3, or with tf_keras when TensorFlow is asked for
# it (TF_USE_LEGACY_KERAS=1), as a user's script would see it through tf.keras.
if os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true"):
    import tensorflow as tf

    keras = tf.keras
else:
    import keras


def setup_determinism():
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()


def digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int32")


def out_dir():
    return sys.argv[1]


def write_run(losses, model):
    pid = os.getpid()
    with open(os.path.join(out_dir(), f"losses-{pid}.json"), "w") as f:
        json.dump([float(v) for v in losses], f)
    weights = np.concatenate([np.asarray(w).ravel().view(np.uint8) for w in model.get_weights()])
    np.save(os.path.join(out_dir(), f"weights-{pid}.npy"), weights)
    print("RUN_DONE", flush=True)


class RecordLoss(keras.callbacks.Callback):
    """Collects every step's training loss; prints each epoch's logs."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(logs["loss"])

    def on_epoch_end(self, epoch, logs=None):
        values = " ".join(f"{k}={v:.8f}" for k, v in sorted(logs.items()))
        print(f"EPOCH {epoch} {values}", flush=True)
