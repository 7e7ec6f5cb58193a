"""Input-pipeline fidelity run: digits stored as PNG strings, a tf.data
pipeline that decodes them (per-element maps, one parallel, one with a
stateless random flip seeded by the element), a seeded shuffle, a ragged last
batch and prefetch: the shape tfmpi rewrites so each rank decodes only its
slices (Note [Sharded input]). fit with validation on such a pipeline, then
evaluate, predict and a custom-loop pass over it.
Usage: train_input_pipeline.py OUT_DIR"""

import numpy as np
import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(5)
x, y = common.digits()
images = (x.reshape(-1, 8, 8, 1) * 255).astype("uint8")
pngs = np.array([tf.io.encode_png(im).numpy() for im in images], dtype=object)


def decode(png, label):
    image = tf.cast(tf.io.decode_png(png, channels=1), tf.float32) / 255.0
    return tf.image.resize(image, [12, 12]), label


def flip(image, label, index):
    seed = tf.stack([index, tf.constant(7, tf.int64)])
    return tf.image.stateless_random_flip_left_right(image, seed), label


def pipeline(start, stop, batch, seed=None):
    source = tf.data.Dataset.from_tensor_slices((pngs[start:stop], y[start:stop]))
    if seed is not None:
        source = source.shuffle(stop - start, seed=seed)
    indexed = source.enumerate().map(lambda i, e: (e[0], e[1], i))
    decoded = indexed.map(lambda p, l, i: (*decode(p, l), i), num_parallel_calls=tf.data.AUTOTUNE)
    return decoded.map(flip).batch(batch).prefetch(2)


# tanh, not relu: at a pre-activation within rounding of 0, relu's derivative
# jumps from 0 to 1, so the last-bit difference that cutting the batch
# differently makes in the convolution's sums (another slice size, another
# summation order) can move the convolution's gradient by 1e-3. Measured with
# unequal shares (1 : 0.9): one pre-activation of 1.8e-7 came out <= 0 on a
# rank and explained the whole difference. That is float32 arithmetic, not the
# math this run checks.
model = keras.Sequential([keras.Input((12, 12, 1)), keras.layers.Conv2D(4, 3, activation="tanh"),
                          keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
record = common.RecordLoss(common.batch_sizes(1437, 50))
# 1437 training samples / batch 50: 29 steps per epoch, the last one ragged (37).
model.fit(pipeline(0, 1437, 50, seed=11), epochs=3, verbose=0,
          validation_data=pipeline(1437, 1797, 64), callbacks=[record])
common.evaluate(model, pipeline(1437, 1797, 64))
predicted = model.predict(pipeline(1437, 1797, 64), verbose=0)
common.collect(record.losses, model, record.bounds,
               extra=[float(predicted.shape[0]), *predicted.sum(axis=0)])

optimizer = keras.optimizers.SGD(0.02)
loss_fn = keras.losses.SparseCategoricalCrossentropy()
losses = []
for xb, yb in pipeline(0, 1437, 64, seed=12):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
common.write_run()
