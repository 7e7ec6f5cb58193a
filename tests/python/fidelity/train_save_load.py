"""Save, then load, mid-script: ModelCheckpoint writes every epoch to one
path; the script then loads that checkpoint into a new model, saves the whole
model and loads it back, saves weights and loads them into a third model, and
trains each further. Every load must see rank 0's complete file (a rank that
reads too early, or a rank without a shared filesystem, would diverge).
Usage: train_save_load.py OUT_DIR"""

import os

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(61)
x, y = common.digits()
work = os.path.join(common.out_dir(), "models")  # the same path on every rank
os.makedirs(work, exist_ok=True)
suffix = ".weights.h5" if not common.LEGACY else ".h5"


def build():
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer=common.optimizer(keras.optimizers.Adam(3e-3)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


sizes = common.batch_sizes(len(x), 64)
record = common.RecordLoss(sizes)
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(work, "ckpt" + suffix),
                                             save_weights_only=True)
first = build()
first.fit(x, y, batch_size=64, epochs=2, verbose=0, callbacks=[record, checkpoint])

second = build()
second.load_weights(os.path.join(work, "ckpt" + suffix))
second.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=[record])
whole = os.path.join(work, "model.keras" if not common.LEGACY else "model.h5")
second.save(whole)
third = keras.models.load_model(whole)
third.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=[record])
third.save_weights(os.path.join(work, "again" + suffix))
fourth = build()
fourth.load_weights(os.path.join(work, "again" + suffix))
fourth.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=[record])
common.evaluate(fourth, x, y)
common.write_run(record.losses, fourth, record.bounds)
