"""Process-wide state of transparent mode."""

active = False
rank = 0
size = 1
options = None
seed = None

# tf.Variable: this rank's share s_i / B of the current global batch (see
# batching.py). Created when TensorFlow is imported.
batch_weight = None

# tf.Variable: B / s_i while the batch is split, else 1 (losses with reduction
# "sum", batching.py).
sum_scale = None
