"""Variable broadcast and gradient reduction, expressed with tfmpi's TensorFlow
ops. Names come from tfmpi.transparent.naming (Note [Collective names]): the
same on every rank running the same script, whatever each rank traced or
touched before.

Note [Gradient buckets]
By default a step's dense gradients go to the engine as one grouped op, which
runs once the whole backward pass is done. With TFMPI_GRADIENT_BUCKET_BYTES=B
they form buckets of about B bytes in reverse order (the backward pass makes
the last layers' gradients first), each its own op; the ops wait only for
their inputs (Note [Concurrent collectives], tensorflow/ops.py), so a bucket
is reduced while the backward pass goes on. Each gradient is still summed
alone over the ranks, so the math does not change. It is off by default:
with one core per rank, the engine's reduction competes with the backward
pass for that core (docs/performance.md, "Exposed communication").
"""

import contextlib
import functools
import threading

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import naming, state

_riders = threading.local()

# Dtypes the engine moves natively, and same-width stand-ins for a broadcast
# (which only copies bytes) of the others.
NATIVE = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool}
_BITCAST = {tf.uint32: tf.int32, tf.uint64: tf.int64, tf.int8: tf.uint8, tf.int16: tf.float16,
            tf.uint16: tf.float16}


@functools.cache
def cpu_only():
    """True where this process sees no GPU (every variable is in host memory,
    where the ops that write variables in place have kernels)."""
    return not tf.config.list_physical_devices("GPU")


def broadcast_variables(variables, root=0):
    """Assign rank `root`'s value to every variable in `variables`. In a
    process without a GPU, resource variables of the dtypes the engine moves
    receive it in place (one grouped op, no copy held beside the variables:
    Note [Sharded update]'s TfmpiOwnersBroadcastVariables, every variable's
    owner `root`; each variable once, as a layer tracked twice lists it
    twice); any others through a received copy that is then assigned."""
    in_place, movable, values = [], [], []
    seen = set()
    for v in variables:
        if (cpu_only() and tf.as_dtype(v.dtype) in NATIVE
                and getattr(v, "handle", None) is not None):
            if id(v) not in seen:
                seen.add(id(v))
                in_place.append(v)
            continue
        t = tf.convert_to_tensor(v)
        if t.dtype in NATIVE:
            values.append(t)
        elif t.dtype in _BITCAST:
            values.append(tf.bitcast(t, _BITCAST[t.dtype]) if t.shape.rank is not None else t)
        else:
            continue
        movable.append(v)
    done = []
    if in_place:
        done.append(tops.owners_broadcast_variables(in_place, [root] * len(in_place),
                                                    names=naming.names("bcast_in_place",
                                                                       len(in_place))))
    if values:
        received = tops.grouped_broadcast(values, root=root, names=naming.names("bcast", len(values)))
        for v, r in zip(movable, received):
            dtype = tf.as_dtype(v.dtype)
            if r.dtype != dtype:
                r = tf.bitcast(r, dtype)
            done.append(v.assign(r))
    done = [d for d in done if d is not None]
    return tf.group(*done) if done else tf.no_op()


class Riders:
    """Tensors summed over ranks in the same grouped op as the next gradient
    reduction (Note [One collective per step], keras_step.py); `reduced`
    holds their sums once it ran, else None."""

    def __init__(self, tensors):
        self.tensors = list(tensors)
        self.reduced = None


@contextlib.contextmanager
def riding_with_gradients(tensors):
    """The next reduce_gradients on this thread also sums `tensors`."""
    riders = Riders(tensors)
    previous = getattr(_riders, "current", None)
    _riders.current = riders
    try:
        yield riders
    finally:
        _riders.current = previous


def reduce_gradients(grads, weight):
    """sum over ranks of weight * grad; IndexedSlices by allgather (no densifying).
    Tensors riding with the gradients (riding_with_gradients) join the dense
    group, unweighted."""
    riders = getattr(_riders, "current", None)
    _riders.current = None  # one reduction takes them
    out = list(grads)
    dense_at, dense = [], []
    sparse_at = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            sparse_at.append(i)
            continue
        g = tf.convert_to_tensor(g)
        dense_at.append(i)
        dense.append(tf.math.multiply_no_nan(g, tf.cast(weight, g.dtype)))
    if sparse_at:
        base = naming.name("sparse_grad")
        for k, i in enumerate(sparse_at):
            g = grads[i]
            values = tf.math.multiply_no_nan(g.values, tf.cast(weight, g.values.dtype))
            out[i] = tf.IndexedSlices(tops.allgather(values, name=f"{base}/{k}/values"),
                                      tops.allgather(g.indices, name=f"{base}/{k}/indices"),
                                      g.dense_shape)
    extra = riders.tensors if riders is not None else []
    if dense or extra:
        reduced = [None] * (len(dense) + len(extra))
        for members in _buckets(dense, len(extra)):
            done = tops.grouped_allreduce([(dense + extra)[j] for j in members], op="sum",
                                          names=naming.names("grad", len(members)))
            for j, r in zip(members, done):
                reduced[j] = r
        for i, r in zip(dense_at, reduced):
            out[i] = r
        if riders is not None:
            riders.reduced = reduced[len(dense):]
    return out


def _buckets(dense, riders):
    """Index lists of the allreduces of dense gradients (and `riders` tensors
    after them): one of all, or with TFMPI_GRADIENT_BUCKET_BYTES, buckets of
    about that many bytes in reverse order (the backward pass makes the last
    layers' gradients first), each its own op, so that a bucket can be reduced
    while the backward pass goes on (Note [Gradient buckets]); the riders join
    the last bucket, which waits for the first layers' gradients anyway."""
    limit = state.options.gradient_buckets if state.options is not None else 0
    every = list(range(len(dense) + riders))
    if not limit or len(dense) < 2:
        return [every]
    groups, current, size = [], [], 0
    for j in reversed(range(len(dense))):
        current.append(j)
        n = dense[j].shape.num_elements()
        size += (n or 0) * dense[j].dtype.size
        if size >= limit:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    groups[-1] = groups[-1] + list(range(len(dense), len(dense) + riders))
    return groups


def reduce_to_owners(grads, weight, roots):
    """weight * grad summed over ranks onto rank roots[i] only (elsewhere the
    result is this rank's own weighted gradient: unused). Tensors riding with
    the gradients (riding_with_gradients) are summed on every rank, in an op
    of their own. Note [Sharded update], sharded_update.py."""
    riders = getattr(_riders, "current", None)
    _riders.current = None
    out = list(grads)
    at = [i for i, g in enumerate(grads) if g is not None]
    dense = [tf.math.multiply_no_nan(tf.convert_to_tensor(grads[i]),
                                     tf.cast(weight, grads[i].dtype)) for i in at]
    if dense:
        done = tops.grouped_reduce(dense, [roots[i] for i in at], op="sum",
                                   names=naming.names("owned_grad", len(dense)))
        for i, r in zip(at, done):
            out[i] = r
    if riders is not None:
        riders.reduced = allreduce_sum(riders.tensors, "riders") if riders.tensors else []
    return out


def broadcast_from_owners(variables, roots, role="owned_update"):
    """Every variable gets its value on rank roots[i], received in place (one
    grouped op on the variables themselves: no copy of the values is made and
    assigned after; inside a tf.function it is ordered after the ops that
    update them and before those that read them, by its resource inputs)."""
    variables = list(variables)
    if variables:
        tops.owners_broadcast_variables(variables, roots,
                                        names=naming.names(role, len(variables)))


def sum_onto(tensors, root, role):
    """Each tensor summed over ranks onto rank `root` only (one grouped op;
    elsewhere the outputs are unused)."""
    tensors = list(tensors)
    return tops.grouped_reduce(tensors, [root] * len(tensors), op="sum",
                               names=naming.names(role, len(tensors)))


def allreduce_sum(tensors, role):
    """Sum of each tensor over ranks, as one grouped op named for `role`."""
    tensors = list(tensors)
    return tops.grouped_allreduce(tensors, op="sum", names=naming.names(role, len(tensors)))
