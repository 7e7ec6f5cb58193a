"""Variable broadcast and gradient reduction, expressed with tfmpi's TensorFlow
ops. Names are derived from structure (variable positions, per-object ids
assigned in first-use order), so they agree across ranks running the same
script."""

import itertools
import threading

import tensorflow as tf

from tfmpi.tensorflow import ops as tops

# Dtypes the engine moves natively, and same-width stand-ins for a broadcast
# (which only copies bytes) of the others.
_NATIVE = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool}
_BITCAST = {tf.uint32: tf.int32, tf.uint64: tf.int64, tf.int8: tf.uint8, tf.int16: tf.float16,
            tf.uint16: tf.float16}

_ids = itertools.count()
_id_lock = threading.Lock()


def object_id(obj, kind):
    """A small id for `obj`, assigned in first-use order (the same on every rank)."""
    attr = f"_tfmpi_{kind}_id"
    value = getattr(obj, attr, None)
    if value is None:
        with _id_lock:
            value = next(_ids)
        try:
            object.__setattr__(obj, attr, value)
        except AttributeError:
            pass
    return value


def _label(var, i):
    return getattr(var, "path", None) or getattr(var, "name", None) or str(i)


def broadcast_variables(variables, prefix, root=0):
    """Assign rank `root`'s value to every variable in `variables` (one grouped op)."""
    movable, values, names = [], [], []
    for i, v in enumerate(variables):
        t = tf.convert_to_tensor(v)
        if t.dtype in _NATIVE:
            values.append(t)
        elif t.dtype in _BITCAST:
            values.append(tf.bitcast(t, _BITCAST[t.dtype]) if t.shape.rank is not None else t)
        else:
            continue
        movable.append(v)
        names.append(f"tfmpi/bcast/{prefix}/{i}/{_label(v, i)}")
    if not values:
        return tf.no_op()
    received = tops.grouped_broadcast(values, root=root, names=names)
    assigns = []
    for v, r in zip(movable, received):
        dtype = tf.as_dtype(v.dtype)
        if r.dtype != dtype:
            r = tf.bitcast(r, dtype)
        assigns.append(v.assign(r))
    return tf.group(*[a for a in assigns if a is not None]) if assigns else tf.no_op()


def reduce_gradients(grads, variables, weight, prefix):
    """sum over ranks of weight * grad; IndexedSlices by allgather (no densifying)."""
    out = list(grads)
    dense_at, dense, names = [], [], []
    for i, (g, v) in enumerate(zip(grads, variables)):
        if g is None:
            continue
        label = f"tfmpi/grad/{prefix}/{i}/{_label(v, i)}"
        if isinstance(g, tf.IndexedSlices):
            values = tf.math.multiply_no_nan(g.values, tf.cast(weight, g.values.dtype))
            out[i] = tf.IndexedSlices(tops.allgather(values, name=label + "/values"),
                                      tops.allgather(g.indices, name=label + "/indices"),
                                      g.dense_shape)
            continue
        g = tf.convert_to_tensor(g)
        dense_at.append(i)
        dense.append(tf.math.multiply_no_nan(g, tf.cast(weight, g.dtype)))
        names.append(label)
    if dense:
        for i, r in zip(dense_at, tops.grouped_allreduce(dense, op="sum", names=names)):
            out[i] = r
    return out


def allreduce_named(tensors, names):
    """Sum of each tensor over ranks, as one grouped op."""
    return tops.grouped_allreduce(list(tensors), op="sum", names=list(names))
