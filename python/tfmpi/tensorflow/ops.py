"""Python wrappers and gradients for the tfmpi TensorFlow ops (kernels in C++)."""

import os

import tensorflow as tf

_LIB_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_tf_ops.so")
if not os.path.exists(_LIB_PATH):
    raise ImportError(
        f"tfmpi was built without its TensorFlow ops ({_LIB_PATH} is missing): reinstall tfmpi "
        "with TensorFlow importable at build time (scripts/setup.sh does this)")
_lib = tf.load_op_library(_LIB_PATH)


# Note [Concurrent collectives]
# Inside a tf.function, TensorFlow's automatic control dependencies chain
# every stateful op that takes no resource in program order. The collectives
# of a step (the loss, the gradients, the metric states) would then run one
# after another, each waiting for its own engine cycle, although their data do
# not depend on each other. The engine matches requests by name, not by order
# (Note [Negotiation protocol]), so allreduces (and reduces to owners) need
# no order: they are listed with TensorFlow's order-insensitive ops, which
# still always run but only wait for their inputs. Broadcasts and allgathers
# keep program order. An op on variables (owners_broadcast_variables) is
# ordered by its resource inputs only, after and before the ops that use the
# same variables, as any op writing a variable is.
ORDER_FREE_OPS = frozenset({"TfmpiAllreduce", "TfmpiGroupedAllreduce", "TfmpiGroupedReduce"})


def _let_allreduces_run_concurrently():
    from tensorflow.python.framework import auto_control_deps as acd
    acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = (
        frozenset(acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS) | ORDER_FREE_OPS)


_let_allreduces_run_concurrently()

REDUCE_OPS = ("sum", "average", "min", "max", "product")


def _check_op(op):
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; use one of {', '.join(REDUCE_OPS)}")


def allreduce(tensor, op="average", name=None):
    """Element-wise reduction of `tensor` over ranks. `name` matches it across ranks."""
    _check_op(op)
    if name is None:
        raise ValueError("tfmpi.tensorflow.allreduce needs a name shared by all ranks")
    return _lib.tfmpi_allreduce(tensor, reduce_op=op, tensor_name=name)


def grouped_allreduce(tensors, op="average", names=None):
    """Allreduce a list of tensors in one op (the engine fuses them)."""
    _check_op(op)
    tensors = list(tensors)
    if not tensors:
        return []
    if names is None or len(names) != len(tensors):
        raise ValueError("grouped_allreduce needs one name per tensor")
    return _lib.tfmpi_grouped_allreduce(tensors, reduce_op=op, tensor_names=list(names))


def broadcast(tensor, root=0, name=None):
    if name is None:
        raise ValueError("tfmpi.tensorflow.broadcast needs a name shared by all ranks")
    return _lib.tfmpi_broadcast(tensor, root_rank=root, tensor_name=name)


def grouped_broadcast(tensors, root=0, names=None):
    tensors = list(tensors)
    if not tensors:
        return []
    if names is None or len(names) != len(tensors):
        raise ValueError("grouped_broadcast needs one name per tensor")
    return _lib.tfmpi_grouped_broadcast(tensors, root_rank=root, tensor_names=list(names))


def _check_roots(what, tensors, roots, names):
    if names is None or len(names) != len(tensors):
        raise ValueError(f"{what} needs one name per tensor")
    if len(roots) != len(tensors):
        raise ValueError(f"{what} needs one root rank per tensor")
    return [int(r) for r in roots]


def grouped_reduce(tensors, roots, op="sum", names=None):
    """Reduce tensor i over ranks onto rank roots[i] only; on the other ranks
    output i is input i. One op: the engine runs a group of several roots as
    one reduce-scatter (Note [Owner layout] in src/tfmpi/planning/owner_layout.h)."""
    _check_op(op)
    tensors = list(tensors)
    if not tensors:
        return []
    roots = _check_roots("grouped_reduce", tensors, roots, names)
    return _lib.tfmpi_grouped_reduce(tensors, reduce_op=op, root_ranks=roots,
                                     tensor_names=list(names))


def owners_broadcast(tensors, roots, names=None):
    """Every rank receives tensor i from rank roots[i] (one op; the engine
    moves a group of several roots as one allgather)."""
    tensors = list(tensors)
    if not tensors:
        return []
    roots = _check_roots("owners_broadcast", tensors, roots, names)
    return _lib.tfmpi_owners_broadcast(tensors, root_ranks=roots, tensor_names=list(names))


def owners_broadcast_variables(variables, roots, names=None):
    """Every rank's variable i gets its value on rank roots[i], received
    straight into the variable (one op, no output; the engine runs it as
    owners_broadcast does, in place)."""
    variables = list(variables)
    if not variables:
        return None
    roots = _check_roots("owners_broadcast_variables", variables, roots, names)
    return _lib.tfmpi_owners_broadcast_variables([v.handle for v in variables], root_ranks=roots,
                                                 tensor_names=list(names))


def allgather(tensor, name=None):
    """Concatenate every rank's tensor along axis 0 (first dimensions may differ)."""
    if name is None:
        raise ValueError("tfmpi.tensorflow.allgather needs a name shared by all ranks")
    return _lib.tfmpi_allgather(tensor, tensor_name=name)


def world():
    """int32 tensor [rank, size, local_rank, local_size]."""
    return _lib.tfmpi_world()


# Gradients. Each rank differentiates its own loss; the gradient of a
# collective is the matching collective of the upstream gradients, named after
# the forward op so the ranks still agree.

def _grad_name(op, i=None):
    base = op.get_attr("tensor_name").decode() if i is None else op.get_attr("tensor_names")[i].decode()
    return "grad_of/" + base


@tf.RegisterGradient("TfmpiAllreduce")
def _allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op").decode()
    if reduce_op not in ("sum", "average"):
        raise NotImplementedError(f"tfmpi allreduce({reduce_op}) has no gradient")
    return _lib.tfmpi_allreduce(grad, reduce_op=reduce_op, tensor_name=_grad_name(op))


@tf.RegisterGradient("TfmpiGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    reduce_op = op.get_attr("reduce_op").decode()
    if reduce_op not in ("sum", "average"):
        raise NotImplementedError(f"tfmpi allreduce({reduce_op}) has no gradient")
    names = ["grad_of/" + n.decode() for n in op.get_attr("tensor_names")]
    grads = [tf.zeros_like(x) if g is None else g for g, x in zip(grads, op.inputs)]
    return _lib.tfmpi_grouped_allreduce(grads, reduce_op=reduce_op, tensor_names=names)


@tf.RegisterGradient("TfmpiBroadcast")
def _broadcast_grad(op, grad):
    root = op.get_attr("root_rank")
    summed = _lib.tfmpi_allreduce(grad, reduce_op="sum", tensor_name=_grad_name(op))
    rank = _lib.tfmpi_world()[0]
    return tf.where(tf.equal(rank, root), summed, tf.zeros_like(summed))


@tf.RegisterGradient("TfmpiAllgather")
def _allgather_grad(op, grad):
    summed = _lib.tfmpi_allreduce(grad, reduce_op="sum", tensor_name=_grad_name(op))
    rows = tf.shape(op.inputs[0], out_type=tf.int64)[:1]
    all_rows = _lib.tfmpi_allgather(rows, tensor_name=_grad_name(op) + "/rows")
    rank = tf.cast(_lib.tfmpi_world()[0], tf.int64)
    start = tf.reduce_sum(all_rows[:rank])
    return summed[start:start + rows[0]]


tf.no_gradient("TfmpiWorld")
tf.no_gradient("TfmpiGroupedBroadcast")
tf.no_gradient("TfmpiOwnersBroadcast")
tf.no_gradient("TfmpiGroupedReduce")
