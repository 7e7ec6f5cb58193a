"""Global values for everything a run prints or returns.

Note [Global metrics]
Every rank updates its metrics on its own slice. Keras metrics keep additive
state (totals and counts, confusion counts), so summing each state variable
over ranks gives the state the 1-process run would have after the same global
batches; Metric.stateless_result turns it into the global value. This runs
wherever Keras reads results (get_metrics_result: in the step, at epoch end, in
evaluate) and, for custom loops, in Metric.result() called eagerly.
Losses: a Keras Loss called on a slice returns the global loss
sum_i w_i * L_i in its forward value, while its gradient stays the local one
(the optimizer wrapper weights and sums gradients), so a custom loop that
prints its loss prints the 1-process value. A loss with reduction "sum" is
first scaled by B / s_i (Note [Global batch], batching.py).
"""

import contextlib
import threading

import tensorflow as tf

from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import batching, collectives, state

_local = threading.local()
SUMMABLE = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64}


@contextlib.contextmanager
def inside(flag):
    setattr(_local, flag, getattr(_local, flag, 0) + 1)
    try:
        yield
    finally:
        setattr(_local, flag, getattr(_local, flag) - 1)


def active(flag):
    return getattr(_local, flag, 0) > 0


def global_results(metrics, prefix):
    """[(metric, result)] computed from the sum of every rank's metric state."""
    values, names = [], []
    for m_index, m in enumerate(metrics):
        for v_index, v in enumerate(m.variables):
            values.append(tf.convert_to_tensor(v))
            names.append(f"tfmpi/metrics/{prefix}/{m_index}/{v_index}")
    summable = [i for i, t in enumerate(values) if t.dtype in SUMMABLE]
    if summable:
        reduced = collectives.allreduce_named([values[i] for i in summable],
                                              [names[i] for i in summable])
        for i, r in zip(summable, reduced):
            values[i] = r
    out, k = [], 0
    with inside("stateless"):
        for m in metrics:
            n = len(m.variables)
            out.append((m, m.stateless_result(values[k:k + n]) if n else m.result()))
            k += n
    return out


def _wrap_get_metrics_result(original):
    def get_metrics_result(self):
        if state.size == 1:
            return original(self)
        return _global_metrics_result(self)

    return get_metrics_result


def _global_metrics_result(self):
    from keras.src.utils import python_utils

    results = {}
    for metric, result in global_results(self.metrics, f"model{collectives.object_id(self, 'model')}"):
        if isinstance(result, dict):
            results.update(result)
        else:
            results[metric.name] = result
    return python_utils.pythonify_logs(results)


def _wrap_result(original):
    def result(self):
        if active("stateless") or not tf.executing_eagerly() or state.size == 1 \
                or not self.variables:
            return original(self)
        (metric, value), = global_results([self], f"metric{collectives.object_id(self, 'metric')}")
        return value

    result._tfmpi_wrapped = True
    return result


def wrap_loss_call(original):
    def __call__(self, y_true, y_pred, sample_weight=None):
        if state.size == 1:
            return original(self, y_true, y_pred, sample_weight)
        nested = active("loss")
        with inside("loss"):
            local = original(self, y_true, y_pred, sample_weight)
        if getattr(local, "shape", None) is None or local.shape.rank != 0:
            return local  # reduction="none": per-sample values stay local
        if str(getattr(self, "reduction", "")).lower() == "sum":  # Note [Global batch]
            local = local * tf.cast(batching.sum_scale_variable(), local.dtype)
        if nested:
            return local
        name = f"tfmpi/loss/{collectives.object_id(self, 'loss')}"

        @tf.custom_gradient
        def globalize(x):
            weighted = x * tf.cast(batching.weight_variable(), x.dtype)
            total = tops.allreduce(weighted, op="sum", name=name)

            def grad(upstream):  # the optimizer weights and sums the local gradients
                return upstream

            return total, grad

        return globalize(local)

    __call__._tfmpi_wrapped = True
    return __call__


def all_subclasses(cls):
    seen, todo = [], [cls]
    while todo:
        c = todo.pop()
        seen.append(c)
        todo.extend(c.__subclasses__())
    return seen


def wrap_metric_results(Metric, wrap):
    """cls.result = wrap(cls.result) for every Metric class that defines
    result(): the ones loaded now, and those a script defines later."""
    def wrap_class(cls):
        fn = cls.__dict__.get("result")
        if fn is not None and not getattr(fn, "_tfmpi_wrapped", False):
            cls.result = wrap(fn)

    for cls in all_subclasses(Metric):
        wrap_class(cls)
    previous = Metric.__dict__.get("__init_subclass__")

    def __init_subclass__(cls, **kwargs):
        if previous is not None:
            previous.__func__(cls, **kwargs)
        else:
            super(Metric, cls).__init_subclass__(**kwargs)
        wrap_class(cls)

    Metric.__init_subclass__ = classmethod(__init_subclass__)


def install():
    import keras  # noqa: F401  (loads every built-in metric class)
    from keras.src.losses.loss import Loss
    from keras.src.metrics.metric import Metric
    from keras.src.trainers.trainer import Trainer

    Trainer.get_metrics_result = _wrap_get_metrics_result(Trainer.get_metrics_result)
    wrap_metric_results(Metric, _wrap_result)
    if not getattr(Loss.__call__, "_tfmpi_wrapped", False):
        Loss.__call__ = wrap_loss_call(Loss.__call__)
