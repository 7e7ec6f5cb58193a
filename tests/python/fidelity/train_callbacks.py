"""Callbacks that change the training: ReduceLROnPlateau lowers the learning
rate when the validation loss stalls, EarlyStopping stops and restores the
best weights. Both decide from global values on every rank, so every rank
stops at the same epoch with the same weights as the 1-process run.
Usage: train_callbacks.py OUT_DIR"""

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(51)
x, y = common.digits()
x_train, y_train, x_val, y_val = x[:400], y[:400], x[1400:], y[1400:]  # small: it overfits
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(10)])
model.compile(optimizer=common.optimizer(keras.optimizers.Adam(2e-2)),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])


class LearningRate(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.rates = []

    def on_epoch_end(self, epoch, logs=None):
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
                          if hasattr(keras, "ops") else float(self.model.optimizer.learning_rate))


record = common.RecordLoss(common.batch_sizes(len(x_train), 32))
rates = LearningRate()
callbacks = [record, keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=0, min_delta=1e-3),
             rates, keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)]
history = model.fit(x_train, y_train, batch_size=32, epochs=12, shuffle=True, verbose=0,
                    validation_data=(x_val, y_val), callbacks=callbacks)  # 13 steps per epoch
print(f"STOPPED after {len(history.history['loss'])} epochs, rates {rates.rates}", flush=True)
common.evaluate(model, x_val, y_val)
common.write_run(record.losses, model, record.bounds,
                 extra=rates.rates + [len(history.history["loss"])])
