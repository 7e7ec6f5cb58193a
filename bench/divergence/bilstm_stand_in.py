"""A small synthetic stand-in for Keras' bidirectional-LSTM IMDB example, for
bench/divergence/compare_runs.py (which runs it in every configuration and
prints the tables). One run takes ~30-60 s on a 2-core machine.

Same structure as the example: Embedding -> Bidirectional(LSTM, return_sequences)
-> Bidirectional(LSTM) -> Dense(1, sigmoid), Adam, binary cross-entropy,
batch 32, validation data. Sizes are scaled down (vocabulary 5000 instead of
20000, sequences of 64 instead of 200, 32 units instead of 64 and 128) and the
data is synthetic: random token ids, of which 2-5 are "sentiment words" of the
sample's class; the task is separable, so the training loss gets tiny (it
overfits, as the IMDB run does by its second epoch).

    python bilstm_stand_in.py OUT_DIR [--variant V] [--floatx float32|float64]
    tfmpirun -np 2 python bilstm_stand_in.py OUT_DIR --tag np2

Variants (all with op determinism, a fixed seed and 1 intra-op thread, unless
--tf-defaults):
  plain        the script as a user writes it (model.fit)
  split        1 process; the train step computes the gradient on the two
               halves of each batch and combines them as (s0/B) g0 + (s1/B) g1,
               the Embedding's IndexedSlices by concatenation: exactly the
               arithmetic of a 2-rank tfmpi run, without tfmpi
  split_dense  as split, but the Embedding gradient is densified before it is
               combined (what a reducer that allreduces IndexedSlices as dense
               tensors would do): a real difference, for contrast
  perturb      plain, with one initial weight (the Dense kernel's entry
               --perturb-index, default 0) moved up by 1 ulp
  gradcheck    no training: the first batch's gradient computed whole and as
               the weighted halves; prints their largest relative difference

Writes OUT_DIR/<tag>-rank<r>.npz: the per-step training loss (the loss tracker
is reset after each batch, so logs["loss"] is that batch's mean loss, not the
running mean of the epoch), weight snapshots (all weights, flattened, as
float64) at selected steps, the final weights and the validation losses.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--variant", default="plain",
                   choices=["plain", "split", "split_dense", "perturb", "gradcheck"])
    p.add_argument("--tag", default=None, help="output file name (default: the variant)")
    p.add_argument("--floatx", default="float32", choices=["float32", "float64"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=6400)
    p.add_argument("--val-samples", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=5000)
    p.add_argument("--maxlen", type=int, default=64)
    p.add_argument("--embed", type=int, default=32)
    p.add_argument("--units", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--snap-every", type=int, default=10)
    p.add_argument("--tf-defaults", action="store_true",
                   help="leave op determinism off and TensorFlow's thread pools as they are")
    p.add_argument("--perturb-index", type=int, default=0,
                   help="perturb: which entry of the Dense kernel moves by 1 ulp")
    return p.parse_args()


def rank():
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def make_data(n, vocab, maxlen, rng):
    """Random tokens; label 1 samples hold 2-5 tokens from ids [2, 52), label 0
    samples 2-5 from [52, 102); the other tokens come from [102, vocab)."""
    x = rng.integers(102, vocab, size=(n, maxlen))
    y = rng.integers(0, 2, size=n)
    for i in range(n):
        k = rng.integers(2, 6)
        pos = rng.choice(maxlen, size=k, replace=False)
        lo = 2 if y[i] == 1 else 52
        x[i, pos] = rng.integers(lo, lo + 50, size=k)
    return x.astype("int32"), y.astype("float32")[:, None]


def main():
    args = parse()
    import tensorflow as tf

    if not args.tf_defaults:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.experimental.enable_op_determinism()
    import keras
    from keras import layers

    keras.config.set_floatx(args.floatx)
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(1234)
    x_train, y_train = make_data(args.samples, args.vocab, args.maxlen, rng)
    x_val, y_val = make_data(args.val_samples, args.vocab, args.maxlen, rng)
    y_train = y_train.astype(args.floatx)
    y_val = y_val.astype(args.floatx)

    def weighted_halves(model, x, y):
        """(s0/B) g0 + (s1/B) g1 as a 2-rank tfmpi run computes it (slices as
        in batching.slice_bounds; weights s_i/B in float32, cast to the
        gradient's dtype, as in collectives.reduce_gradients)."""
        batch = tf.shape(x)[0]
        s0 = batch // 2 + batch % 2
        tv = model.trainable_variables
        parts, losses = [], []
        for lo, hi in ((0, s0), (s0, batch)):
            xs, ys = x[lo:hi], y[lo:hi]
            with tf.GradientTape() as tape:
                yp = model(xs, training=True)
                loss = model._compute_loss(x=xs, y=ys, y_pred=yp, sample_weight=None,
                                           training=True)
            w = tf.math.divide_no_nan(tf.cast(hi - lo, tf.float32), tf.cast(batch, tf.float32))
            parts.append((tape.gradient(loss, tv), w))
            losses.append((loss, hi - lo, xs, ys, yp))
        dense_embedding = model.dense_embedding
        combined = []
        for i in range(len(tv)):
            (g0, w0), (g1, w1) = (parts[0][0][i], parts[0][1]), (parts[1][0][i], parts[1][1])
            if isinstance(g0, tf.IndexedSlices) and not dense_embedding:
                v0 = tf.math.multiply_no_nan(g0.values, tf.cast(w0, g0.values.dtype))
                v1 = tf.math.multiply_no_nan(g1.values, tf.cast(w1, g1.values.dtype))
                combined.append(tf.IndexedSlices(tf.concat([v0, v1], 0),
                                                 tf.concat([g0.indices, g1.indices], 0),
                                                 g0.dense_shape))
            else:
                g0, g1 = tf.convert_to_tensor(g0), tf.convert_to_tensor(g1)
                combined.append(tf.math.multiply_no_nan(g0, tf.cast(w0, g0.dtype))
                                + tf.math.multiply_no_nan(g1, tf.cast(w1, g1.dtype)))
        return combined, losses

    class Model(keras.Model):
        split = False
        dense_embedding = False

        def train_step(self, data):
            if not self.split:
                return super().train_step(data)
            x, y = data[0], data[1]
            grads, losses = weighted_halves(self, x, y)
            self.optimizer.apply(grads, self.trainable_variables)
            for loss, size, xs, ys, yp in losses:
                self._loss_tracker.update_state(loss, sample_weight=size)
                logs = self.compute_metrics(xs, ys, yp, sample_weight=None)
            return logs

    inputs = keras.Input(shape=(None,), dtype="int32")
    h = layers.Embedding(args.vocab, args.embed)(inputs)
    h = layers.Bidirectional(layers.LSTM(args.units, return_sequences=True))(h)
    h = layers.Bidirectional(layers.LSTM(args.units))(h)
    outputs = layers.Dense(1, activation="sigmoid")(h)
    model = Model(inputs, outputs)
    model.split = args.variant in ("split", "split_dense")
    model.dense_embedding = args.variant == "split_dense"
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])

    if args.variant == "perturb":
        k = model.layers[-1].kernel
        value = np.array(k.numpy())
        i = args.perturb_index
        value.flat[i] = np.nextafter(value.flat[i], np.inf)
        k.assign(value)

    if args.variant == "gradcheck":
        x, y = tf.constant(x_train[:args.batch_size]), tf.constant(y_train[:args.batch_size])
        with tf.GradientTape() as tape:
            loss = model._compute_loss(x=x, y=y, y_pred=model(x, training=True),
                                       sample_weight=None, training=True)
        whole = tape.gradient(loss, model.trainable_variables)
        halves, _ = weighted_halves(model, x, y)
        worst = 0.0
        for v, a, b in zip(model.trainable_variables, whole, halves):
            a = np.asarray(tf.convert_to_tensor(a), np.float64)
            b = np.asarray(tf.convert_to_tensor(b), np.float64)
            rel = np.linalg.norm(a - b) / np.linalg.norm(a)
            worst = max(worst, rel)
            print(f"GRAD {v.path:45s} rel_l2_diff={rel:.3e}")
        print(f"GRADCHECK floatx={args.floatx} max_rel_l2_diff={worst:.3e}")
        return

    snaps, snap_steps, losses, val_losses = [], [], [], []
    every = args.snap_every
    early = {1, 2, 3, 5, 10, 20, 50}

    def flat_weights():
        return np.concatenate([np.asarray(w, np.float64).ravel() for w in model.get_weights()])

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))
            self.model._loss_tracker.reset_state()  # next logs["loss"]: that batch alone
            step = len(losses)
            if step in early or step % every == 0:
                snap_steps.append(step)
                snaps.append(flat_weights())

        def on_epoch_end(self, epoch, logs=None):
            val_losses.append(float(logs["val_loss"]))

    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              validation_data=(x_val, y_val), callbacks=[Record()], verbose=0)
    tag = args.tag or args.variant
    path = os.path.join(args.out, f"{tag}-rank{rank()}.npz")
    np.savez(path, losses=np.array(losses), snap_steps=np.array(snap_steps),
             snaps=np.array(snaps), final=flat_weights(), val_losses=np.array(val_losses),
             steps_per_epoch=-(-args.samples // args.batch_size))
    steps = -(-args.samples // args.batch_size)
    ep = [np.mean(losses[i * steps:(i + 1) * steps]) for i in range(args.epochs)]
    print(f"RUN {tag} floatx={args.floatx} epoch_losses={['%.6g' % v for v in ep]} "
          f"val_losses={['%.6g' % v for v in val_losses]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
