"""A Keras 2 style model (tf_keras): subclassed with its own train_step that
uses compiled_loss / compiled_metrics and returns each metric's result().
Usage: train_keras2_step.py OUT_DIR"""

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(9)
x, y = common.digits()


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(32, activation="tanh")
        self.out = keras.layers.Dense(10)

    def call(self, inputs):
        return self.out(self.hidden(inputs))

    def train_step(self, data):
        xb, yb = data
        with tf.GradientTape() as tape:
            logits = self(xb, training=True)
            loss = self.compiled_loss(yb, logits, regularization_losses=self.losses)
        self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
        self.compiled_metrics.update_state(yb, logits)
        return {m.name: m.result() for m in self.metrics}


model = Classifier()
model.compile(optimizer=common.optimizer(keras.optimizers.legacy.RMSprop(1e-3)),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["sparse_categorical_accuracy"])
record = common.RecordLoss(common.batch_sizes(1797, 64))
model.fit(x, y, batch_size=64, epochs=4, shuffle=True, verbose=0, callbacks=[record])  # 29 steps
common.write_run(record.losses, model, record.bounds)
