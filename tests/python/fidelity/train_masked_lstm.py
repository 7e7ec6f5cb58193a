"""An LSTM tagging padded sequences of different lengths: Embedding with
mask_zero, so the per-timestep loss is a mean over the unmasked steps only
("mask"); or no mask and unequal sample weights with the loss reduction
"mean_with_sample_weight" ("weighted", Keras 3 only): in both the loss divides
by a count that is not proportional to a rank's slice. Both by default, one
after the other. Usage: train_masked_lstm.py OUT_DIR [mask,weighted]"""

import sys

import numpy as np

import common
from common import keras

common.setup_determinism()
rng = np.random.default_rng(3)
n, steps, vocab = 600, 12, 30
lengths = rng.integers(2, steps + 1, size=n)
tokens = rng.integers(1, vocab, size=(n, steps))
tokens[np.arange(steps)[None, :] >= lengths[:, None]] = 0  # right padding
tags = (tokens % 3).astype("int32")  # the tag of a token: learnable from the token alone


def train(mode):
    model = keras.Sequential([keras.Input((steps,), dtype="int32"),
                              keras.layers.Embedding(vocab, 8, mask_zero=(mode == "mask")),
                              keras.layers.LSTM(16, return_sequences=True),
                              keras.layers.Dense(3)])
    fit_kwargs = {}
    if mode == "mask":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                          reduction="mean_with_sample_weight")
        fit_kwargs["sample_weight"] = (1.0 + lengths % 5).astype("float32")[:, None]
    model.compile(optimizer=common.optimizer(keras.optimizers.Adam(1e-2)), loss=loss)
    batch = 50  # 12 steps per epoch
    record = common.RecordLoss(common.batch_sizes(n, batch))
    model.fit(tokens, tags, batch_size=batch, epochs=4, shuffle=True, verbose=0,
              callbacks=[record], **fit_kwargs)
    common.evaluate(model, tokens, tags, **fit_kwargs)
    common.collect(record.losses, model, record.bounds)


default = "mask" if common.LEGACY else "mask,weighted"  # tf_keras has no mean_with_sample_weight
for i, mode in enumerate((sys.argv[2] if len(sys.argv) > 2 else default).split(",")):
    keras.utils.set_random_seed(41 + i)
    train(mode)
common.write_run()
