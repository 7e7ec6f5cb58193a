"""TensorFlow ops over the tfmpi engine: usable eagerly and inside tf.function.

    import tfmpi, tfmpi.tensorflow as tft
    tfmpi.init()
    y = tft.allreduce(x, op="average", name="grad/w")

Names match collectives across ranks; every rank must use the same names.
"""

from tfmpi.tensorflow.ops import (  # noqa: F401
    allgather,
    allreduce,
    broadcast,
    grouped_allreduce,
    grouped_broadcast,
    grouped_reduce,
    owners_broadcast,
    owners_broadcast_variables,
    world,
)
