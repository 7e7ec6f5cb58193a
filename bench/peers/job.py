"""One timed training run of bench/peers/run.py, the same model, synthetic
data, global batch and steps under each framework:

  plain    one process, the script as written (model.fit)
  tfmpi    the same unchanged script; run it under tfmpirun
  mwms     TensorFlow's MultiWorkerMirroredStrategy, one process per worker
           (TF_CONFIG set by the caller); Keras 3's fit fails under it
           (keras-team/keras#20585), so the step is driven through
           strategy.run in a tf.function that also takes the next batch, as
           TensorFlow's custom-loop tutorial does, with the loss averaged over
           the global batch
  horovod  Horovod's Keras integration as its docs write it (DistributedOptimizer,
           the initial weights broadcast, each rank fitting its own 1/N of the
           data at batch B/N); run it under mpirun with the Horovod environment's
           Python (TensorFlow 2.15, tf.keras, the legacy Adam)
  plain-tf2.15  Horovod's job without Horovod, one process: the baseline on
           Horovod's stack (TensorFlow 2.15's Keras runs a step at another speed)
  plain-tf.keras, tfmpi-tf.keras  the same tf.keras script (legacy Adam) on this
           TensorFlow with TF_USE_LEGACY_KERAS=1 (tf_keras), as one process and
           under tfmpirun: tfmpi on the Keras that Horovod's job uses

Thread pools are whatever the environment gives (TF_NUM_INTRAOP_THREADS and
TF_NUM_INTEROP_THREADS; the caller sets the same for every framework).
Rank 0 prints one line, "PEERS_RESULT {json}": the mean and the median time
from the end of one step to the end of the next, over the steps after
--warmup, and a checksum of the final weights (rank 0's).

    python bench/peers/job.py {plain,tfmpi,mwms,horovod} {mlp42m,resnet50,tiny}
        [--steps 30] [--warmup 5] [--batch B]
"""

import argparse
import json
import os
import time

import numpy as np

MODELS = {
    # name: (global batch, input shape, classes, logits out?)
    # 2048 -> 4096 -> 4096 -> 4096 -> 10: 42 M parameters, communication-heavy
    "mlp42m": (64, (2048,), 10, True),
    # keras.applications.ResNet50(weights=None) on 128x128 images: 25.6 M parameters
    "resnet50": (32, (128, 128, 3), 1000, False),
    # a few thousand parameters: what the tests run
    "tiny": (16, (16,), 4, True),
}


def build(keras, name):
    _, shape, classes, _ = MODELS[name]
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None, input_shape=shape, classes=classes)
    widths = [4096] * 3 if name == "mlp42m" else [32]
    return keras.Sequential([keras.Input(shape)]
                            + [keras.layers.Dense(w, activation="relu") for w in widths]
                            + [keras.layers.Dense(classes)])


def data(name, samples):
    _, shape, classes, _ = MODELS[name]
    rng = np.random.default_rng(1)
    x = rng.random((samples, *shape), dtype=np.float32)
    return x, rng.integers(0, classes, samples).astype(np.int32)


def rank_and_size():
    for rank, size in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    if config:
        return config["task"]["index"], len(config["cluster"]["worker"])
    return 0, 1


class StepEnds:
    """Keras callback: the time each training batch ended."""

    def __init__(self, keras):
        outer = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                outer.ends.append(time.perf_counter())

        self.ends = []
        self.callback = Callback()


def fit(keras, model, args, batch, x, y, callbacks=()):
    ends = StepEnds(keras)
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0,
              callbacks=[*callbacks, ends.callback])
    return ends.ends


def loss(keras, name, reduction="sum_over_batch_size"):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=MODELS[name][3],
                                                      reduction=reduction)


def run_keras(args, x, y):
    """plain and tfmpi: the unchanged script."""
    import keras
    keras.utils.set_random_seed(1)
    model = build(keras, args.model)
    model.compile(optimizer=keras.optimizers.Adam(), loss=loss(keras, args.model))
    return fit(keras, model, args, args.batch, x, y), model.get_weights()


def run_tf_keras(args, x, y, horovod=False):
    """The script written for tf.keras (TensorFlow 2.15's, or tf_keras with
    TF_USE_LEGACY_KERAS=1) with the optimizer Horovod needs; with
    horovod=True, Horovod's version of it."""
    import tensorflow as tf
    keras = tf.keras
    keras.utils.set_random_seed(1)
    model = build(keras, args.model)
    # The legacy Adam: Horovod 0.28's wrapper predates TF 2.11's optimizer.
    optimizer = keras.optimizers.legacy.Adam()
    if not horovod:
        model.compile(optimizer=optimizer, loss=loss(keras, args.model))
        return fit(keras, model, args, args.batch, x, y), model.get_weights()
    import horovod.tensorflow.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer), loss=loss(keras, args.model))
    per_rank = args.batch // hvd.size()
    part = slice(hvd.rank(), None, hvd.size())
    ends = fit(keras, model, args, per_rank, x[part], y[part],
               callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    return ends, model.get_weights()


def run_mwms(args, x, y):
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = build(keras, args.model)
        optimizer = keras.optimizers.Adam()
        per_sample = loss(keras, args.model, reduction="none")

    def dataset(context):
        per_replica = context.get_per_replica_batch_size(args.batch)
        return (tf.data.Dataset.from_tensor_slices((x, y))
                .shard(context.num_input_pipelines, context.input_pipeline_id)
                .batch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE))

    batches = iter(strategy.distribute_datasets_from_function(dataset))

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            value = tf.nn.compute_average_loss(per_sample(yb, model(xb, training=True)),
                                               global_batch_size=args.batch)
        grads = tape.gradient(value, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return value

    @tf.function
    def step(iterator):
        losses = strategy.run(replica_step, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    ends = []
    for _ in range(args.steps):
        step(batches).numpy()
        ends.append(time.perf_counter())
    return ends, [v.numpy() for v in model.weights]


FRAMEWORKS = {
    "plain": run_keras, "tfmpi": run_keras, "mwms": run_mwms,
    "horovod": lambda *a: run_tf_keras(*a, horovod=True),
    "plain-tf2.15": run_tf_keras,  # with the Horovod environment's Python
    "plain-tf.keras": run_tf_keras, "tfmpi-tf.keras": run_tf_keras,  # TF_USE_LEGACY_KERAS=1
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="steps not timed")
    parser.add_argument("--batch", type=int, help="the global batch (default: the model's)")
    args = parser.parse_args()
    args.batch = args.batch or MODELS[args.model][0]
    if args.steps < args.warmup + 2:
        parser.error(f"--steps {args.steps}: needs at least --warmup + 2 ({args.warmup + 2})")
    rank, size = rank_and_size()
    if args.batch % size:
        parser.error(f"--batch {args.batch}: not a multiple of the {size} ranks")
    x, y = data(args.model, args.batch * args.steps)
    if args.framework.endswith("tf.keras") and os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        parser.error(f"{args.framework}: set TF_USE_LEGACY_KERAS=1 (tf.keras must be tf_keras)")
    run = FRAMEWORKS[args.framework]
    ends, weights = run(args, x, y)
    if len(ends) != args.steps:
        raise SystemExit(f"peers job: {len(ends)} steps ran, {args.steps} expected")
    gaps = np.diff(ends[args.warmup:])
    if rank == 0:
        print("PEERS_RESULT " + json.dumps({
            "framework": args.framework, "model": args.model, "ranks": size,
            "batch": args.batch, "steps": len(gaps),
            "step_ms": 1e3 * float(np.median(gaps)), "mean_ms": 1e3 * float(np.mean(gaps)),
            "checksum": float(sum(np.abs(w).sum(dtype=np.float64) for w in weights))}),
            flush=True)


if __name__ == "__main__":
    main()
