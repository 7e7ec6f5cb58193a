"""Keras 3's Adam (and AdamW) and SGD-with-momentum updates in one pass over
memory (TFMPI_FUSED_UPDATES, on by default).

Note [Fused updates] (src/tfmpi/bindings/tensorflow/fused_updates.cc) has the
kernels and why they are bit for bit Keras' updates. Here, update_step
computes its scalars with Keras' own ops, as Keras does, and hands the
element-wise part to a kernel. The stock update runs instead where a kernel
does not apply: Adam's amsgrad, SGD without momentum, a variable that is not
float32 or float64, a sparse gradient, a GPU in the process, an XLA-compiled
function, a tf.distribute strategy in scope, hyperparameters that are not
Python numbers, a subclass with its own update_step or assign methods; or
where the first use's check found the two updates differ on this machine
(rank 0 says so once per optimizer, dtype and set of hyperparameters).
"""

import sys
import threading

import numpy as np
import tensorflow as tf

from tfmpi.transparent import collectives, state

_FLOAT_TYPES = ("float32", "float64")
_lock = threading.Lock()
_agrees = {}        # (optimizer, dtype, hyperparameters...) -> kernel and stock agree bit for bit


def _ops():
    from tfmpi.tensorflow import ops
    return ops._lib


def _in_xla():
    from tensorflow.python.ops import control_flow_util
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _dtype_name(variable):
    """A Keras variable's dtype is a string; the tf.Variable Keras' TensorFlow
    optimizer hands to update_step has a tf.DType."""
    return tf.as_dtype(variable.dtype).name


def _numbers(*values):
    """The values as floats if all are Python numbers (bools included) and none
    is NaN (a NaN key would never match the checks already made), else None."""
    if all(isinstance(x, (int, float)) and x == x for x in values):
        return tuple(float(x) for x in values)
    return None


def _like(slot, variable):
    """A slot the kernel can update with its variable: same dtype and shape
    (a subclass may build slots otherwise; Keras' ops would cast them)."""
    return (tf.as_dtype(slot.dtype) == tf.as_dtype(variable.dtype)
            and tuple(slot.shape) == tuple(variable.shape))


class _Adam:
    name = "Adam"
    module = "keras.src.optimizers.adam"

    @staticmethod
    def hyperparameters(opt):
        return None if opt.amsgrad else _numbers(opt.beta_1, opt.beta_2, opt.epsilon)

    @staticmethod
    def slots_fit(opt, variable):
        index = opt._get_variable_index(variable)
        return all(_like(s[index], variable) for s in (opt._momentums, opt._velocities))

    @staticmethod
    def update(opt, gradient, variable, learning_rate):
        """Adam.update_step's math (keras/src/optimizers/adam.py), the
        element-wise part in the kernel."""
        from keras import ops
        from keras.src.backend import convert_to_tensor

        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        local_step = ops.cast(opt.iterations + 1, dtype)
        beta_1_power = ops.power(ops.cast(opt.beta_1, dtype), local_step)
        beta_2_power = ops.power(ops.cast(opt.beta_2, dtype), local_step)
        index = opt._get_variable_index(variable)
        m = opt._momentums[index]
        v = opt._velocities[index]
        alpha = lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        # Keras multiplies by the Python floats 1 - beta and adds epsilon, each
        # converted to dtype once, as convert_to_tensor does here.
        _ops().tfmpi_apply_adam(var=variable.handle, m=m.handle, v=v.handle, grad=gradient,
                                one_minus_beta_1=convert_to_tensor(1 - opt.beta_1, dtype),
                                one_minus_beta_2=convert_to_tensor(1 - opt.beta_2, dtype),
                                alpha=alpha, epsilon=convert_to_tensor(opt.epsilon, dtype))

    @staticmethod
    def like(opt, name):
        import keras
        return keras.optimizers.Adam(1e-3, beta_1=opt.beta_1, beta_2=opt.beta_2,
                                     epsilon=opt.epsilon, name=name)


class _SGD:
    name = "SGD"
    module = "keras.src.optimizers.sgd"

    @staticmethod
    def hyperparameters(opt):
        values = _numbers(opt.momentum, opt.nesterov)
        return values if values is not None and values[0] != 0 else None

    @staticmethod
    def slots_fit(opt, variable):
        return _like(opt.momentums[opt._get_variable_index(variable)], variable)

    @staticmethod
    def update(opt, gradient, variable, learning_rate):
        """SGD.update_step's math with momentum (keras/src/optimizers/sgd.py),
        the element-wise part in the kernel."""
        from keras import ops

        dtype = variable.dtype
        learning_rate = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        m = opt.momentums[opt._get_variable_index(variable)]
        momentum = ops.cast(opt.momentum, dtype)
        _ops().tfmpi_apply_momentum(var=variable.handle, m=m.handle, grad=gradient,
                                    momentum=momentum, lr=learning_rate,
                                    nesterov=bool(opt.nesterov))

    @staticmethod
    def like(opt, name):
        import keras
        return keras.optimizers.SGD(1e-2, momentum=opt.momentum, nesterov=opt.nesterov, name=name)


FUSIONS = (_Adam, _SGD)


def _applies(fusion, opt, gradient, variable, patched, stock_assign):
    return (type(opt).update_step is patched
            and all(getattr(type(opt), name) is f for name, f in stock_assign.items())
            and fusion.hyperparameters(opt) is not None
            and _dtype_name(variable) in _FLOAT_TYPES
            and fusion.slots_fit(opt, variable)
            and not isinstance(gradient, tf.IndexedSlices)
            and collectives.cpu_only() and not tf.distribute.has_strategy() and not _in_xla())


def _check_values(dtype, n=4099):
    """Values of every scale, signs, zeros and subnormal-sized ones."""
    rng = np.random.default_rng(7)
    scale = np.exp(rng.uniform(-90, 12, n))
    x = (rng.standard_normal(n) * scale).astype(dtype)
    x[:8] = [0.0, -0.0, 1.0, -1.0, 1e-38, -1e-40, 3.0e38, 1e-7]
    return x


def _run_check(fusion, opt, original, dtype):
    """Two updates of the same variable by the stock update_step and by the
    kernel, in tf.functions as in training; True when they agree bit for bit."""
    import keras

    results = []
    for fused in (False, True):
        # Named, so that Keras' counters of automatic names (adam, adam_1, ...)
        # give the user's objects the names they have without tfmpi.
        var = keras.Variable(_check_values(dtype), dtype=dtype, name="tfmpi_fused_update_check")
        check = fusion.like(opt, "tfmpi_fused_update_check")
        check.build([var])
        grads = [tf.constant(_check_values(dtype)[::-1].copy()), tf.constant(_check_values(dtype))]

        @tf.function
        def step(g):
            if fused:
                fusion.update(check, g, var, check.learning_rate)
            else:
                original(check, g, var, check.learning_rate)
            check.iterations.assign_add(1)

        for g in grads:
            step(g)
        results.append([var.numpy()] + [s.numpy() for s in check.variables if s.shape == var.shape])
    return all(np.array_equal(a.view(np.uint8), b.view(np.uint8))
               for a, b in zip(results[0], results[1]))


def _agree(fusion, opt, original, dtype):
    key = (fusion.name, dtype) + fusion.hyperparameters(opt)
    with _lock:
        if key not in _agrees:
            with tf.init_scope():
                try:
                    ok = _run_check(fusion, opt, original, dtype)
                except Exception as e:  # noqa: BLE001 - any failure means: keep the stock update
                    ok, why = False, f"{type(e).__name__}: {e}"
                else:
                    why = "its results differ from the stock update's on this machine"
            _agrees[key] = ok
            if not ok and state.rank == 0:
                print(f"tfmpi: Keras' {fusion.name} update runs as separate ops for {dtype} "
                      f"variables (hyperparameters {key[2:]}): the fused update "
                      f"(TFMPI_FUSED_UPDATES) is not used because {why}", file=sys.stderr,
                      flush=True)
        return _agrees[key]


def _install(fusion):
    import importlib

    cls = getattr(importlib.import_module(fusion.module), fusion.name)
    if getattr(cls.update_step, "_tfmpi_wrapped", False):
        return
    original = cls.update_step
    stock_assign = {name: getattr(cls, name) for name in ("assign", "assign_add", "assign_sub")}

    def update_step(self, gradient, variable, learning_rate):
        if (_applies(fusion, self, gradient, variable, update_step, stock_assign)
                and _agree(fusion, self, original, _dtype_name(variable))):
            return fusion.update(self, gradient, variable, learning_rate)
        return original(self, gradient, variable, learning_rate)

    update_step._tfmpi_wrapped = True
    update_step.__doc__ = original.__doc__
    cls.update_step = update_step


def install():
    """Patches keras' Adam.update_step (AdamW inherits it) and SGD.update_step."""
    for fusion in FUSIONS:
        _install(fusion)
