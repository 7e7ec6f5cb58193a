"""model.fit fidelity run: MLP on digits, ragged last batch, shuffle, validation,
class weights, a ModelCheckpoint named by PID. Usage: train_fit.py OUT_DIR [BN]"""

import os
import sys


import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(3)
x, y = common.digits()
with_bn = len(sys.argv) > 2 and sys.argv[2] == "bn"

layers = [keras.Input(shape=(64,)), keras.layers.Dense(32)]
if with_bn:
    layers.append(keras.layers.BatchNormalization())
layers += [keras.layers.Activation("relu"), keras.layers.Dense(10, activation="softmax")]
model = keras.Sequential(layers)
model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])


record = common.RecordLoss(common.batch_sizes(1437, 50))
checkpoint = keras.callbacks.ModelCheckpoint(
    os.path.join(common.out_dir(), f"ckpt-{os.getpid()}.weights.h5"), save_weights_only=True)
# 1437 training samples / batch 50: 29 steps per epoch, the last one ragged (37).
model.fit(x[:1437], y[:1437], batch_size=50, epochs=4, shuffle=True, verbose=0,
          validation_data=(x[1437:], y[1437:]), class_weight={i: 1.0 + 0.1 * i for i in range(10)},
          callbacks=[record, checkpoint])
common.evaluate(model, x[1437:], y[1437:])
common.write_run(record.losses, model, record.bounds)
