"""Synthetic-data ResNet-50 training throughput (keras.applications, weights=None;
nothing is downloaded). No tfmpi import: under tfmpirun each rank takes its
slice of every global batch.

    python examples/resnet50_synthetic.py --batch-size 16 --steps 12
    tfmpirun -np 2 python examples/resnet50_synthetic.py --batch-size 16 --steps 12

Prints images/second over the timed steps (the first --warmup steps are not timed) and
the median time of one step, which a burst of load on a shared machine moves less.
"""

import argparse
import statistics
import time

import keras
import numpy as np
import tensorflow as tf


class Throughput(keras.callbacks.Callback):
    def __init__(self, warmup, batch_size):
        super().__init__()
        self.warmup, self.batch_size = warmup, batch_size
        self.start = self.last = None
        self.step_times = []

    @property
    def steps(self):
        return len(self.step_times)

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if batch + 1 == self.warmup:
            self.start = now
        elif batch + 1 > self.warmup:
            self.step_times.append(now - self.last)
        self.last = now

    def images_per_second(self):
        return self.steps * self.batch_size / (self.last - self.start)

    def median_step_seconds(self):
        return statistics.median(self.step_times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=16, help="global batch size")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TF default)")
    parser.add_argument("--jit", choices=["auto", "on", "off"], default="auto",
                        help="XLA compilation (Keras jit_compile)")
    args = parser.parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)

    keras.utils.set_random_seed(0)
    model = keras.applications.ResNet50(weights=None, input_shape=(args.image_size,) * 2 + (3,),
                                        classes=1000)
    jit = {"auto": "auto", "on": True, "off": False}[args.jit]
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy",
                  jit_compile=jit)
    n = args.batch_size * args.steps
    rng = np.random.default_rng(0)
    x = rng.random((args.batch_size, args.image_size, args.image_size, 3), dtype=np.float32)
    y = rng.integers(0, 1000, args.batch_size)
    data = tf.data.Dataset.from_tensors((x, y)).repeat(args.steps)
    meter = Throughput(args.warmup, args.batch_size)
    model.fit(data, epochs=1, verbose=0, callbacks=[meter])
    params = model.count_params()
    print(f"resnet50 synthetic: {params / 1e6:.1f} M parameters, global batch {args.batch_size}, "
          f"{args.image_size}x{args.image_size}: {meter.images_per_second():.2f} images/s "
          f"over {meter.steps} steps ({n} images in all); median step "
          f"{meter.median_step_seconds() * 1000:.1f} ms")


if __name__ == "__main__":
    main()
