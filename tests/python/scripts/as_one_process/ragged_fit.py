"""Variable-length sequences (a RaggedTensor component of a tf.data
pipeline) in batches of BATCH: in per-rank batch mode dealt by speed, a
step's batches are put together ragged and cut by the shares. Usage:
ragged_fit.py OUT BATCH"""

import sys

import numpy as np
import tensorflow as tf

from small_data import Record, keras, write

batch = int(sys.argv[2])
keras.utils.set_random_seed(4)
rng = np.random.default_rng(0)
lengths = rng.integers(1, 7, size=160)  # sequences of 1-6 values
x = tf.RaggedTensor.from_row_lengths(rng.normal(size=lengths.sum()).astype("float32"), lengths)
y = (np.array([v.sum() for v in np.split(x.flat_values.numpy(), np.cumsum(lengths)[:-1])]) * 0.5
     + lengths * 0.1).astype("float32")[:, None]


class Summary(keras.layers.Layer):
    """A ragged batch [B, (len)] -> [B, 2]: each sequence's sum and length."""

    def compute_output_shape(self, shape):
        return (shape[0], 2)

    def call(self, r):
        return tf.stack([tf.reduce_sum(r, axis=1), tf.cast(r.row_lengths(), "float32")], axis=1)


model = keras.Sequential([Summary(), keras.layers.Dense(4, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse")
record = Record()
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch), epochs=2, verbose=0,
          callbacks=[record])
write(record.losses, model, sizes=sorted(record.sizes))
