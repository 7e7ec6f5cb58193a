"""A GAN-style model with its own train_step and two optimizers (after the
Keras guide on overriding train_step): the discriminator learns to tell real
digits from generated ones, the generator learns to fool it; latent vectors
are drawn with keras.random inside the step at the batch's shape, and the
step reports its own loss trackers. Usage: train_gan.py OUT_DIR"""

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(21)
x, _ = common.digits()
LATENT = 8


class GAN(keras.Model):
    def __init__(self):
        super().__init__()
        self.discriminator = keras.Sequential([keras.Input((64,)),
                                               keras.layers.Dense(32, activation="relu"),
                                               keras.layers.Dropout(0.1), keras.layers.Dense(1)])
        self.generator = keras.Sequential([keras.Input((LATENT,)),
                                           keras.layers.Dense(32, activation="relu"),
                                           keras.layers.Dense(64, activation="sigmoid")])
        self.seeds = keras.random.SeedGenerator(5)
        self.d_tracker = keras.metrics.Mean(name="d_loss")
        self.g_tracker = keras.metrics.Mean(name="g_loss")

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

    @property
    def metrics(self):
        return [self.d_tracker, self.g_tracker]

    def train_step(self, real):
        batch = tf.shape(real)[0]
        latent = keras.random.normal((batch, LATENT), seed=self.seeds)
        fake = self.generator(latent)
        with tf.GradientTape() as tape:
            real_logits = self.discriminator(real, training=True)
            fake_logits = self.discriminator(fake, training=True)
            d_loss = (self.loss_fn(tf.ones_like(real_logits), real_logits)
                      + self.loss_fn(tf.zeros_like(fake_logits), fake_logits))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))

        latent = keras.random.normal((batch, LATENT), seed=self.seeds)
        with tf.GradientTape() as tape:
            fake_logits = self.discriminator(self.generator(latent), training=True)
            g_loss = self.loss_fn(tf.ones_like(fake_logits), fake_logits)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        self.d_tracker.update_state(d_loss)
        self.g_tracker.update_state(g_loss)
        return {"d_loss": self.d_tracker.result(), "g_loss": self.g_tracker.result()}


gan = GAN()
gan.compile(common.optimizer(keras.optimizers.Adam(1e-3)),
            common.optimizer(keras.optimizers.Adam(1e-3)),
            keras.losses.BinaryCrossentropy(from_logits=True))
record = common.RecordLoss([1], keys=("d_loss", "g_loss"))  # trackers: one update per step
gan.fit(x, batch_size=64, epochs=2, shuffle=True, verbose=0, callbacks=[record])  # 29 steps each
common.write_run(record.losses, gan, record.bounds)
