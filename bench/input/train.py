"""An input-bound Keras training script (plain Keras, never mentions tfmpi):
PNG images decoded, resized and standardised by a tf.data map, a tiny model.
Prints the median training rate of the epochs after the first (which traces).

    python bench/input/train.py [--images 1024] [--size 256] [--batch 256] [--epochs 8] [--threads 1]

--threads: TensorFlow's intra/inter-op threads and tf.data's private thread
pool for this process (1: one core's worth per process)."""

import argparse
import time

import numpy as np
import tensorflow as tf
import keras

p = argparse.ArgumentParser()
p.add_argument("--images", type=int, default=1024)
p.add_argument("--size", type=int, default=256)
p.add_argument("--batch", type=int, default=256)
p.add_argument("--epochs", type=int, default=8)
p.add_argument("--threads", type=int, default=1)
args = p.parse_args()
tf.config.threading.set_intra_op_parallelism_threads(args.threads)
tf.config.threading.set_inter_op_parallelism_threads(args.threads)
keras.utils.set_random_seed(0)

# Generated images (smooth gradients plus noise, so PNG has real work), encoded once.
rng = np.random.default_rng(0)
ramp = np.linspace(0, 200, args.size, dtype=np.float32)
pngs, labels = [], rng.integers(0, 10, args.images).astype("int32")
for i in range(args.images):
    image = ramp[None, :, None] + ramp[:, None, None] * (labels[i] / 10.0)
    image = image + rng.normal(0, 20, (args.size, args.size, 3))
    pngs.append(tf.io.encode_png(np.clip(image, 0, 255).astype(np.uint8)).numpy())
pngs = np.array(pngs, dtype=object)


def decode(png, label):
    image = tf.cast(tf.io.decode_png(png, channels=3), tf.float32)
    image = tf.image.resize(image, [96, 96], method="bicubic")
    return tf.image.per_image_standardization(image), label


options = tf.data.Options()
options.threading.private_threadpool_size = args.threads
dataset = (tf.data.Dataset.from_tensor_slices((pngs, labels)).shuffle(args.images, seed=1)
           .map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(args.batch)
           .prefetch(tf.data.AUTOTUNE).with_options(options))

model = keras.Sequential([keras.Input((96, 96, 3)), keras.layers.Conv2D(4, 3, strides=4),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
model.compile(keras.optimizers.SGD(0.01),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True))


class Rate(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if epoch > 0:
            rates.append(args.images / (time.perf_counter() - self.start))


rates = []
model.fit(dataset, epochs=args.epochs, verbose=0, callbacks=[Rate()])
print(f"{np.median(rates):.1f} samples/s", flush=True)
