"""Random layers: Dropout, SpatialDropout2D, GaussianNoise, GaussianDropout,
AlphaDropout and image augmentation (flip, translation, rotation, zoom,
contrast) on digits as 8x8 images, trained with model.fit ("fit") and with a
custom GradientTape loop that also draws noise itself with keras.random (with
tf_keras: a tf.random.Generator) ("loop"), and a custom loop whose draws need
the other ranks' rows ("rows": mixup of each batch with a stateless shuffle
of its own rows and labels, per-row binomial counts; plain SGD), one after
the other; on the first SAMPLES digits if given (1793: every pass ends with a
batch of one sample, which every rank computes whole).
Usage: train_random.py OUT_DIR [fit,loop,rows] [SAMPLES]"""

import sys

import tensorflow as tf

import common
from common import keras

common.setup_determinism()
x, y = common.digits()
x = x.reshape(-1, 8, 8, 1)
if len(sys.argv) > 3:
    x, y = x[:int(sys.argv[3])], y[:int(sys.argv[3])]
layers = keras.layers
BATCH, EPOCHS = 64, 2  # 1797 samples: 29 steps per epoch, the last one ragged (5)


def build():
    augment = [layers.RandomFlip("horizontal"), layers.RandomTranslation(0.1, 0.1),
               layers.RandomRotation(0.05), layers.RandomZoom(0.1), layers.RandomContrast(0.2)]
    return keras.Sequential(
        [keras.Input(shape=(8, 8, 1))] + augment + [
            layers.Conv2D(8, 3, activation="relu"), layers.SpatialDropout2D(0.1),
            layers.Flatten(), layers.GaussianNoise(0.05), layers.Dense(32, activation="selu"),
            layers.AlphaDropout(0.05), layers.GaussianDropout(0.1), layers.Dropout(0.2),
            layers.Dense(10)])


def epochs_of(train_step, dataset):
    """EPOCHS passes of a custom loop over `dataset`: every step's loss."""
    losses = []
    for epoch in range(EPOCHS):
        for xb, yb in dataset:
            losses.append(float(train_step(xb, yb)))
        print(f"EPOCH {epoch} last_loss={losses[-1]:.8f}", flush=True)
    return losses


def fit():
    model = build()
    model.compile(optimizer=common.optimizer(keras.optimizers.Adam(3e-3)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    record = common.RecordLoss(common.batch_sizes(len(x), BATCH))
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=True, verbose=0, callbacks=[record])
    common.evaluate(model, x, y)
    common.collect(record.losses, model, record.bounds)


def loop():
    model = build()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = common.optimizer(keras.optimizers.Adam(3e-3))
    model.compile(loss=loss_fn, metrics=["accuracy"])  # for evaluate only
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000, seed=1).batch(BATCH)
    if common.LEGACY:  # tf_keras has no keras.random: a tf.random.Generator draws instead
        generator = tf.random.Generator.from_seed(7)
        draw = lambda shape: generator.normal(shape, stddev=0.05)  # noqa: E731
    else:
        seeds = keras.random.SeedGenerator(7)
        draw = lambda shape: keras.random.normal(shape, stddev=0.05, seed=seeds)  # noqa: E731

    @tf.function
    def train_step(xb, yb):
        noise = draw(tf.shape(xb))
        with tf.GradientTape() as tape:
            logits = model(xb + noise, training=True)
            loss = loss_fn(yb, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = epochs_of(train_step, dataset)
    common.evaluate(model, x, y)
    common.collect(losses, model)


def rows():
    model = keras.Sequential([keras.Input(shape=(8, 8, 1)), layers.Conv2D(8, 3, activation="relu"),
                              layers.Flatten(), layers.Dense(10)])
    loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.SGD(0.05)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000, seed=2).batch(BATCH)
    generator = tf.random.Generator.from_seed(5)

    @tf.function
    def train_step(xb, yb):
        seed = generator.make_seeds()[:, 0]
        onehot = tf.one_hot(yb, 10)
        # the same permutation of the batch's rows for the images and their labels
        xs = tf.random.experimental.stateless_shuffle(xb, seed)
        ys = tf.random.experimental.stateless_shuffle(onehot, seed)
        rows = tf.shape(xb)[0]
        lam = tf.random.stateless_uniform([rows, 1], seed=seed + 1)
        # a count per row: the draw needs every row's count
        flips = tf.random.stateless_binomial([rows], seed + 2, counts=tf.cast(yb + 1, tf.float32),
                                             probs=0.3, output_dtype=tf.float32)
        scale = (1.0 + 0.02 * flips)[:, None, None, None]
        mixed = scale * (lam[:, :, None, None] * xb + (1 - lam[:, :, None, None]) * xs)
        target = lam * onehot + (1 - lam) * ys
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(mixed, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    common.collect(epochs_of(train_step, dataset), model)


for i, mode in enumerate((sys.argv[2] if len(sys.argv) > 2 else "fit,loop").split(",")):
    keras.utils.set_random_seed(11 + i)
    {"fit": fit, "loop": loop, "rows": rows}[mode]()
common.write_run()
