"""Shared by the scripts of this folder (plain Keras; tests/python/
test_transparent_behaviour.py runs each as one process and under tfmpirun
and compares): the Keras a user's script gets (Keras 3, or tf.keras where
TF_USE_LEGACY_KERAS=1 asks TensorFlow for tf_keras), this process's rank
(0 in a plain run), data every rank and the 1-process run make alike, a
callback that records each step's loss and the slice sizes a rank trained on,
and write(), which each script ends with: rank-<rank>.json in the folder
argv[1]."""

import json
import os
import sys

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true"):
    import tensorflow as tf

    keras = tf.keras
else:
    import keras

rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
keras.utils.set_random_seed(4)
rng = np.random.default_rng(0)
x = rng.normal(size=(192, 5)).astype("float32")
y = (x[:, :1] * 0.7 - x[:, 1:2]).astype("float32")


def write(loss, model, **extra):
    """The losses, the model's weights and `extra` values, as rank-<rank>.json."""
    record = {"loss": [float(v) for v in loss],
              "weights": [np.asarray(w).tolist() for w in model.get_weights()], **extra}
    with open(os.path.join(sys.argv[1], f"rank-{rank}.json"), "w") as f:
        json.dump(record, f)


class Record(keras.callbacks.Callback):
    """Each training step's loss (`losses`), and the sizes of the slices this
    rank trained on (`sizes`; none in a plain run)."""

    def __init__(self):
        super().__init__()
        self.losses, self.sizes = [], set()

    def on_train_batch_end(self, step, logs=None):
        self.losses.append(float(logs["loss"]))
        try:
            import tfmpi.transparent.state as s
        except ImportError:
            return
        if s.split is not None:
            self.sizes.add(int(s.split.numpy()[1]))
