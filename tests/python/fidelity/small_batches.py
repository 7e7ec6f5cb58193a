"""Batches with fewer rows than ranks, in every Keras layer family.

One model with a branch per layer family (an input and an output each):
images through convolutions of every kind (transposed, separable, depthwise),
pooling, padding, cropping, up-sampling and random augmentation and dropout;
an autoencoder's shape (convolutions down, transposed up, as a VAE's decoder
or a U-Net); sequences through 1D convolutions (transposed, separable,
depthwise), LSTM, GRU and a bidirectional RNN; volumes through 3D
convolutions; tokens through an embedding, multi-head and dot-product
attention; vectors through merging layers, BatchNormalization, noise,
regularizers and dropout. It predicts and evaluates batches of 1, 2 and 3
rows, and trains epochs whose last batch has 1, 2 or 3 rows (batches of 4
before it), from numpy arrays and from tf.data pipelines whose map makes
them sharded pipelines under tfmpirun (predict, evaluate, fit and a custom
loop). Under `tfmpirun -np N` a batch of fewer than N rows is computed whole
by every rank, so each of these must give the 1-process values (Note
[Batches smaller than the ranks]). Plain Keras; the process writes
small-<pid>.npz into the folder given as argv[1]: every output, evaluation,
epoch log, custom-loop loss and the weights. First what every run does
(keys without a number), then each small batch of ROWS in turn (keys ending
in its rows), so a run asked for fewer ROWS does what the 1-process run did
first. Usage: small_batches.py OUT_DIR [ROWS, e.g. 1,2]"""

import os
import sys

import numpy as np

from common import LEGACY, keras, out_dir, setup_determinism

import tensorflow as tf

if LEGACY:  # tf_keras' default RNG is not exact in custom loops (docs/transparent.md, Random
    # draws); with a tf.random.Generator its random layers are
    keras.backend.experimental.enable_tf_random_generator()
layers = keras.layers
# the rows of the small batches: every count below 4 ranks, or those argv[2] lists
# (under tfmpirun -np N the test asks for 1..N-1: larger ones are split as usual)
ROWS = tuple(int(k) for k in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1, 2, 3)
SAMPLES = 11


def image_2d(x):
    h = layers.RandomFlip("horizontal")(x)
    h = layers.Conv2D(4, 3, padding="same", activation="relu")(h)
    h = layers.BatchNormalization()(h)
    h = layers.DepthwiseConv2D(3, padding="same")(h)
    h = layers.SeparableConv2D(4, 3, padding="same")(h)
    h = layers.MaxPooling2D(2)(h)
    h = layers.Conv2DTranspose(3, 3, strides=2, padding="same")(h)
    h = layers.Cropping2D(1)(layers.ZeroPadding2D(1)(h))
    h = layers.AveragePooling2D(2)(layers.UpSampling2D(2)(h))
    h = layers.GlobalAveragePooling2D()(layers.SpatialDropout2D(0.2)(h))
    return layers.Dense(3, activation="softmax", name="image_2d")(layers.Dropout(0.3)(h))


def autoencoder(x):
    h = layers.Conv2D(4, 3, strides=2, padding="same", activation="relu")(x)
    h = layers.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu")(h)
    return layers.Conv2D(1, 3, padding="same", name="autoencoder")(h)


def sequence_1d(x):
    h = layers.Conv1D(4, 3, padding="same", activation="relu")(x)
    h = layers.DepthwiseConv1D(3, padding="same")(h)
    h = layers.SeparableConv1D(4, 3, padding="same")(h)
    h = layers.Conv1DTranspose(4, 3, padding="same")(h)
    h = layers.MaxPooling1D(2)(h)
    h = layers.GRU(4, return_sequences=True)(layers.LSTM(5, return_sequences=True)(h))
    h = layers.Bidirectional(layers.SimpleRNN(3))(h)
    return layers.Dense(3, activation="softmax", name="sequence_1d")(h)


def volume_3d(x):
    h = layers.Conv3D(3, 3, padding="same", activation="relu")(x)
    h = layers.MaxPooling3D(2)(layers.Conv3DTranspose(2, 3, padding="same")(h))
    return layers.Dense(3, activation="softmax", name="volume_3d")(
        layers.GlobalAveragePooling3D()(h))


def attention(tokens):
    h = layers.Embedding(20, 8)(tokens)
    h = layers.LayerNormalization()(layers.MultiHeadAttention(num_heads=2, key_dim=4)(h, h))
    h = layers.GlobalAveragePooling1D()(layers.Attention(name="dot_product_attention")([h, h]))
    return layers.Dense(3, activation="softmax", name="attention")(h)


def dense_and_merging(a, b):
    h = layers.Concatenate()([layers.Dense(6)(a), layers.Dense(6)(b)])
    h = layers.Add()([h, layers.Dense(12)(h)])
    h = layers.GaussianNoise(0.1)(layers.BatchNormalization()(h))
    h = layers.ActivityRegularization(l2=1e-3)(h)
    h = layers.Dense(8, activation="relu", kernel_regularizer="l2")(h)
    return layers.Dense(3, activation="softmax", name="dense_and_merging")(layers.Dropout(0.2)(h))


def build():
    """The model, its inputs and its targets (dicts by name)."""
    rng = np.random.RandomState(0)
    shapes = {"image": (8, 8, 2), "picture": (8, 8, 1), "sequence": (10, 3),
              "volume": (4, 4, 4, 1), "a": (5,), "b": (4,)}
    inputs = {name: keras.Input(shape, name=name) for name, shape in shapes.items()}
    inputs["tokens"] = keras.Input((6,), dtype="int32", name="tokens")
    x = {name: rng.rand(SAMPLES, *shape).astype("float32") for name, shape in shapes.items()}
    x["tokens"] = rng.randint(1, 20, size=(SAMPLES, 6)).astype("int32")
    outputs = {"image_2d": image_2d(inputs["image"]),
               "autoencoder": autoencoder(inputs["picture"]),
               "sequence_1d": sequence_1d(inputs["sequence"]),
               "volume_3d": volume_3d(inputs["volume"]),
               "attention": attention(inputs["tokens"]),
               "dense_and_merging": dense_and_merging(inputs["a"], inputs["b"])}
    y = {name: rng.randint(0, 3, size=(SAMPLES,)).astype("int32") for name in outputs}
    y["autoencoder"] = x["picture"]
    return keras.Model(inputs, outputs), x, y


def rows(d, k):
    return {name: t[:k] for name, t in d.items()}


def flat(outputs):
    if isinstance(outputs, dict):
        return {name: np.asarray(v) for name, v in sorted(outputs.items())}
    return {str(i): np.asarray(v) for i, v in enumerate(outputs)}


def weights(model):
    return np.concatenate([np.ravel(w) for w in model.get_weights()]).astype("float64")


def main():
    setup_determinism()
    keras.utils.set_random_seed(7)
    model, x, y = build()
    losses = {name: keras.losses.SparseCategoricalCrossentropy() for name in y}
    losses["autoencoder"] = keras.losses.MeanSquaredError()
    metrics = {name: ["sparse_categorical_accuracy"] for name in y}
    metrics["autoencoder"] = ["mae"]
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=losses, metrics=metrics)
    out = {}

    def keep(key, values):  # the batch's rows, if any, end the key: "image_2d/predict1"
        if isinstance(values, dict):
            for name, v in flat(values).items():
                out[f"{name}/{key}"] = v
        else:
            out[key] = np.asarray(values)

    def logs(history):
        return {name: v[0] for name, v in history.history.items()}

    # tf.data pipelines whose map makes tfmpirun shard them (each rank decodes its rows)
    def pipeline(k, batch, inputs_only=False):
        return tf.data.Dataset.from_tensor_slices((rows(x, k), rows(y, k))).map(
            lambda a, b: (a,) if inputs_only else (a, b)).batch(batch)

    keep("evaluate_pipeline", model.evaluate(pipeline(3, 8), verbose=0, return_dict=True))
    keep("fit_pipeline", logs(model.fit(pipeline(9, 4), epochs=1, verbose=0)))  # last batch: 1
    # a custom loop over such a pipeline (11 rows: a last batch of 3)
    optimizer = keras.optimizers.SGD(0.05)

    @tf.function
    def step(a, b):
        with tf.GradientTape() as tape:
            predicted = model(a, training=True)
            loss = tf.add_n([losses[name](b[name], predicted[name]) for name in sorted(losses)])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    keep("custom_loop", [float(step(a, b)) for a, b in pipeline(SAMPLES, 4)])
    keep("weights", weights(model))
    for k in ROWS:
        keep(f"predict{k}", model.predict(rows(x, k), batch_size=8, verbose=0))
        keep(f"predict_pipeline{k}", model.predict(pipeline(k, 8, True), verbose=0))
        keep(f"evaluate{k}", model.evaluate(rows(x, k), rows(y, k), batch_size=8, verbose=0,
                                            return_dict=True))
        keep(f"fit{k}", logs(model.fit(rows(x, 8 + k), rows(y, 8 + k), batch_size=4, epochs=1,
                                       shuffle=False, verbose=0)))
        keep(f"weights{k}", weights(model))
    np.savez(os.path.join(out_dir(), f"small-{os.getpid()}.npz"), **out)


if __name__ == "__main__":
    main()
