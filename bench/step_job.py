"""One timed training run for bench/threads/run.py and bench/messages/run.py:
a small MLP, CNN (also with BatchNormalization) or bidirectional LSTM, a communication-heavy MLP of 12 M or 42 M
parameters, or ResNet-50, on synthetic data, trained with model.fit at a fixed global batch,
TensorFlow's thread pools left at whatever the run was given. Prints
"STEP_MS <median ms per step>" and "STEP_MEAN_MS <mean ms per step>", the
first 5 steps excluded (rank 0 under tfmpirun). Under a CPU quota the median
hides the steps that wait for the quota's next period; the mean counts them.

    python bench/step_job.py {tiny,mlp,cnn,cnn_bn,bn_stack,lstm,mlp12m,mlp42m,resnet50} [--steps N] [--batch B]
                             [--metrics] [--optimizer {adam,sgd-momentum}] [--memory]
                             [--save-every K]

--memory also prints, from every rank (tfmpirun --all-ranks-output shows them all),
"MEMORY_MB rank <r> rss <resident MB at the last step's end> peak <the process's peak
resident MB so far> steady_peak <the peak over the steps after the first 5>" (Linux
/proc/self/status; the peak is reset through /proc/self/clear_refs after step 5, so
steady_peak leaves out building the model and optimizer and tracing the step).
--save-every K writes the model with its optimizer state (a .keras file in a
temporary folder, removed at the end) every K steps during fit, as a
ModelCheckpoint does; the steps that write are in the times, and in steady_peak.
"""

import argparse
import os
import tempfile
import time

import numpy as np
import keras

MODELS = {
    # name: (global batch, inputs, model builder)
    # tiny: nearly no compute, so its step time is the fixed cost of a step
    "tiny": (64, lambda n: np.random.rand(n, 16).astype("float32"),
             lambda: keras.Sequential([keras.Input((16,)), keras.layers.Dense(10)])),
    "mlp": (128, lambda n: np.random.rand(n, 784).astype("float32"),
            lambda: keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                                      keras.layers.Dense(512, activation="relu"),
                                      keras.layers.Dense(10)])),
    "cnn": (64, lambda n: np.random.rand(n, 32, 32, 1).astype("float32"),
            lambda: keras.Sequential([keras.Input((32, 32, 1)),
                                      keras.layers.Conv2D(32, 3, activation="relu"),
                                      keras.layers.MaxPooling2D(),
                                      keras.layers.Conv2D(64, 3, activation="relu"),
                                      keras.layers.MaxPooling2D(), keras.layers.Flatten(),
                                      keras.layers.Dense(128, activation="relu"),
                                      keras.layers.Dense(10)])),
    # the small CNN with a BatchNormalization after each convolution
    "cnn_bn": (64, lambda n: np.random.rand(n, 32, 32, 1).astype("float32"),
               lambda: keras.Sequential([keras.Input((32, 32, 1)),
                                         keras.layers.Conv2D(32, 3),
                                         keras.layers.BatchNormalization(),
                                         keras.layers.ReLU(), keras.layers.MaxPooling2D(),
                                         keras.layers.Conv2D(64, 3),
                                         keras.layers.BatchNormalization(),
                                         keras.layers.ReLU(), keras.layers.MaxPooling2D(),
                                         keras.layers.Flatten(),
                                         keras.layers.Dense(128, activation="relu"),
                                         keras.layers.Dense(10)])),
    # 20 x (Dense 32, BatchNormalization, ReLU): little compute per BatchNormalization
    # layer, so a step is mostly what synchronizing the layers' moments costs
    "bn_stack": (64, lambda n: np.random.rand(n, 32).astype("float32"),
                 lambda: keras.Sequential([keras.Input((32,))] + [
                     layer for _ in range(20) for layer in (keras.layers.Dense(32),
                                                            keras.layers.BatchNormalization(),
                                                            keras.layers.ReLU())]
                     + [keras.layers.Dense(10)])),
    # 2048 -> 4096 -> 4096 -> 4096 -> 10: 42 M parameters, 168 MB of float32 gradients
    "mlp42m": (64, lambda n: np.random.rand(n, 2048).astype("float32"),
               lambda: keras.Sequential([keras.Input((2048,))]
                                        + [keras.layers.Dense(4096, activation="relu")
                                           for _ in range(3)]
                                        + [keras.layers.Dense(10)])),
    # 2048 -> 2048 x 3 -> 10: 12.6 M parameters, 50 MB of float32 gradients
    "mlp12m": (64, lambda n: np.random.rand(n, 2048).astype("float32"),
               lambda: keras.Sequential([keras.Input((2048,))]
                                        + [keras.layers.Dense(2048, activation="relu")
                                           for _ in range(3)]
                                        + [keras.layers.Dense(10)])),
    # keras.applications.ResNet50(weights=None) on 128x128 images, as bench/peers/job.py:
    # 25.6 M parameters (labels 0-9 of its 1000 classes)
    "resnet50": (32, lambda n: np.random.rand(n, 128, 128, 3).astype("float32"),
                 lambda: keras.applications.ResNet50(weights=None, input_shape=(128, 128, 3),
                                                     classes=1000, classifier_activation=None)),
    "lstm": (32, lambda n: np.random.randint(0, 5000, (n, 64)),
             lambda: keras.Sequential([keras.Input((64,), dtype="int32"),
                                       keras.layers.Embedding(5000, 32),
                                       keras.layers.Bidirectional(keras.layers.LSTM(32)),
                                       keras.layers.Dense(10)])),
}


def _resident_mb():
    """(VmRSS, VmHWM) of this process in MB."""
    fields = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))


class StepTimes(keras.callbacks.Callback):
    def __init__(self, track_memory):
        super().__init__()
        self.times = []
        self.memory = None
        self.whole_peak = 0.0
        self.track_memory = track_memory

    def on_train_batch_begin(self, batch, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter() - self.start)
        if self.track_memory:
            if len(self.times) == 5:
                self.whole_peak = _resident_mb()[1]
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # resets VmHWM to the current resident size
            self.memory = _resident_mb()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, help="the global batch (default: the model's)")
    parser.add_argument("--metrics", action="store_true", help="compile with an accuracy metric")
    parser.add_argument("--optimizer", choices=("adam", "sgd-momentum"), default="adam",
                        help="Keras' Adam (the default) or SGD with momentum 0.9")
    parser.add_argument("--memory", action="store_true",
                        help="print every rank's resident memory at the last step's end")
    parser.add_argument("--save-every", type=int, metavar="K",
                        help="write the model and optimizer state every K steps during fit")
    args = parser.parse_args()
    if args.batch is not None and args.batch < 1:
        parser.error(f"--batch {args.batch}: must be at least 1")
    if args.save_every is not None and args.save_every < 1:
        parser.error(f"--save-every {args.save_every}: must be at least 1")
    keras.utils.set_random_seed(1)
    batch, inputs, build = MODELS[args.model]
    batch = args.batch or batch
    n = batch * args.steps
    x, y = inputs(n), np.random.randint(0, 10, n)
    model = build()
    optimizer = "adam" if args.optimizer == "adam" else keras.optimizers.SGD(0.01, momentum=0.9)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"] if args.metrics else None)
    timer = StepTimes(args.memory)
    with tempfile.TemporaryDirectory() as folder:
        callbacks = [timer]
        if args.save_every:  # before the timer: its step ends after the write
            callbacks.insert(0, keras.callbacks.ModelCheckpoint(
                os.path.join(folder, "model.keras"), save_freq=args.save_every))
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    print(f"STEP_MS {1000 * float(np.median(timer.times[5:])):.2f}", flush=True)
    print(f"STEP_MEAN_MS {1000 * float(np.mean(timer.times[5:])):.2f}", flush=True)
    if args.memory:
        rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
        rss, steady = timer.memory
        peak = max(timer.whole_peak, steady)
        print(f"MEMORY_MB rank {rank} rss {rss:.0f} peak {peak:.0f} steady_peak {steady:.0f}",
              flush=True)


if __name__ == "__main__":
    main()
