"""Global values for everything a run prints or returns.

Note [Global metrics]
Every rank updates its metrics on its own slice. Keras metrics keep additive
state (totals and counts, confusion counts), so summing each state variable
over ranks gives the state the 1-process run would have after the same global
batches; Metric.stateless_result turns it into the global value. This runs
wherever Keras reads results (get_metrics_result: in the step, at epoch end, in
evaluate) and, for custom loops, in Metric.result(), read eagerly or inside a
tf.function. Keras 3's own train step sums the states in the gradients'
collective instead (Note [One collective per step], keras_step.py).
Evaluation and prediction always split the batch (steps.py), also in
per-rank batch mode, so every sample is counted exactly once. Code that runs
on rank 0 alone (Note [Rank-0 sections], rank0.py) reads rank 0's own state.
Losses: see losses.py.
Note [Metric state aggregation] says how a state is combined when it is not a sum.
A batch every rank computes whole (fewer rows than ranks, Note [Batches
smaller than the ranks], batching.py) is counted once: on every rank but 0 a
metric's update leaves its state as it was (count_once).
"""

import functools
import sys

import tensorflow as tf

from tfmpi.transparent import batching, collectives, flags, rank0, state

SUMMABLE = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64}

# Note [Metric state aggregation]
# A metric's state variable says how replicas combine it: the `aggregation` of
# Keras 3's add_variable and of tf_keras' add_weight, "sum" by default in both
# (every built-in metric keeps sums). Ranks combine each state as tf.distribute
# reads such a variable across replicas: "sum" is the sum over ranks,
# "mean" the mean over ranks, "only_first_replica" rank 0's value; "none"
# (which tf.distribute refuses to read across replicas) is summed, as before.
# All of them go in the one sum over ranks that carries the others: a rank
# other than 0 adds zeros for an "only_first_replica" state (its own value
# stays its own), and a "mean" state's sum is divided by the number of ranks
# afterwards. Only additive states (sums and counts over samples) give the
# 1-process value. A state the script's own update_state keeps otherwise (a
# running max, the last batch's value) can't be recovered from the ranks'
# states, so rank 0 says once per such metric class that its result may
# differ from the 1-process run's (tfmpi can't tell an additive state from
# another by its code).
_NOT_A_SCRIPT = ("keras", "tf_keras", "tensorflow", "tfmpi")
_noticed_classes = set()


def aggregation(variable):
    """How ranks combine a metric state: "sum", "mean" or "only_first_replica"
    (Note [Metric state aggregation])."""
    kind = getattr(variable, "aggregation", None)
    kind = str(getattr(kind, "name", kind)).lower()  # tf_keras: a tf.VariableAggregation
    return kind if kind in ("mean", "only_first_replica") else "sum"


def contribution(variable, value):
    """What this rank adds to the sum over ranks of the state `variable`
    holding `value`."""
    if state.rank != 0 and aggregation(variable) == "only_first_replica":
        return tf.zeros_like(value)
    return value


def combined(variable, summed):
    """The state `variable` combined over ranks, from the sum of the ranks'
    contributions."""
    if aggregation(variable) != "mean":
        return summed
    if summed.dtype.is_integer:
        return summed // state.size
    return summed / tf.cast(state.size, summed.dtype)


def _leaves(metrics):
    """The metrics themselves, with containers (Keras' compiled metrics)
    replaced by what they hold."""
    out = []
    for m in metrics:
        inner = getattr(m, "metrics", None)
        if not isinstance(inner, (list, tuple)):
            inner = getattr(m, "_metrics", None)
        inner = [x for x in inner if x is not m] if isinstance(inner, (list, tuple)) else []
        out.extend(_leaves(inner) if inner else [m])
    return out


def note_script_metrics(metrics):
    """Rank 0 says once per class that a metric whose update_state the script
    defines is combined by its states' aggregation (Note [Metric state aggregation])."""
    for m in _leaves(metrics):
        cls = type(m)
        if cls in _noticed_classes or not m.variables:  # (no state yet: looked at again later)
            continue
        _noticed_classes.add(cls)
        update = getattr(cls, "update_state", None)
        module = getattr(update, "__module__", None) or cls.__module__
        if state.rank == 0 and module.partition(".")[0] not in _NOT_A_SCRIPT:
            print(f"tfmpi: note: metric {m.name!r} ({cls.__name__}) updates its state with the "
                  "script's own code: its states are combined over ranks by their aggregation "
                  "(a sum unless add_variable/add_weight says \"mean\" or "
                  "\"only_first_replica\"), so its result is the 1-process result only if its "
                  "states are sums over samples (docs/transparent.md, What the run prints and "
                  "returns).", file=sys.stderr)


def summable_states(metrics):
    """(every state variable of `metrics` in order, their values, the positions
    of the ones combined over ranks). A combined position holds this rank's
    contribution to the sum over ranks; `combine` makes the states of the sums."""
    note_script_metrics(metrics)
    variables = [v for m in metrics for v in m.variables]
    values = [tf.convert_to_tensor(v) for v in variables]
    summable = [i for i, t in enumerate(values) if t.dtype in SUMMABLE]
    for i in summable:
        values[i] = contribution(variables[i], values[i])
    return variables, values, summable


def combine(variables, values, summable, summed):
    """`values` with each position in `summable` the state combined from its
    sum over ranks, `summed` (in the order of `summable`)."""
    for i, s in zip(summable, summed):
        values[i] = combined(variables[i], s)
    return values


def results_from_states(metrics, values):
    """[(metric, result)] computed from `values` (as summable_states lists them)."""
    out, k = [], 0
    with flags.inside("stateless"):
        for m in metrics:
            n = len(m.variables)
            out.append((m, m.stateless_result(values[k:k + n]) if n else m.result()))
            k += n
    return out


def global_results(metrics):
    """[(metric, result)] computed from the sum of every rank's metric state."""
    variables, values, summable = summable_states(metrics)
    if summable:
        reduced = collectives.allreduce_sum([values[i] for i in summable], "metrics")
        combine(variables, values, summable, reduced)
    return results_from_states(metrics, values)


def results_dict(results):
    """{name: result} of [(metric, result)] as both Keras lines' get_metrics_result
    make it: a metric whose result is a dict adds its entries."""
    logs = {}
    for metric, result in results:
        if isinstance(result, dict):
            logs.update(result)
        else:
            logs[metric.name] = result
    return logs


def logs_from_results(results):
    """The logs dict Keras 3's get_metrics_result makes of [(metric, result)]."""
    from keras.src.utils import python_utils

    return python_utils.pythonify_logs(results_dict(results))


def _wrap_get_metrics_result(original):
    @functools.wraps(original)
    def get_metrics_result(self):
        if state.size == 1 or rank0.inside():
            return original(self)
        return _global_metrics_result(self)

    return get_metrics_result


def _global_metrics_result(self):
    return logs_from_results(global_results(self.metrics))


def _wrap_result(original):
    @functools.wraps(original)
    def result(self):
        if flags.active("stateless") or state.size == 1 or not self.variables or rank0.inside():
            return original(self)
        (metric, value), = global_results([self])
        return value

    result._tfmpi_wrapped = True
    return result


def count_once(update_state):
    """Wraps a metric's update_state: while every rank holds the whole batch
    (Note [Batches smaller than the ranks], batching.py), the update counts on
    rank 0 only; on the other ranks the state is put back as it was, so the
    sum over ranks counts the batch once. The outermost update of nested ones
    (Keras' compiled metrics, a subclass calling its parent's) does it."""
    @functools.wraps(update_state)
    def wrapper(self, *args, **kwargs):
        with flags.inside("metric_update"):  # its means are not the batch's (gradient_tape.py)
            return _count_once(update_state, self, args, kwargs)

    wrapper._tfmpi_wrapped = True
    return wrapper


def _count_once(update_state, self, args, kwargs):
    if state.rank == 0 or state.size == 1 or flags.active("count_once") or rank0.inside():
        return update_state(self, *args, **kwargs)
    replicated = batching.replicated()
    if replicated is None or (tf.executing_eagerly() and not bool(replicated)):
        return update_state(self, *args, **kwargs)
    variables = list(self.variables)
    before = [tf.identity(tf.convert_to_tensor(v)) for v in variables]
    with flags.inside("count_once"):
        result = update_state(self, *args, **kwargs)
    for v, old in zip(variables, before):
        v.assign(old if tf.executing_eagerly() else
                 tf.where(replicated, old, tf.convert_to_tensor(v)))
    return result


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
    wrap_metric_methods(Metric, "result", wrap)


def wrap_metric_methods(Metric, name, wrap):
    """cls.<name> = wrap(cls.<name>) for every Metric class that defines it:
    the ones loaded now, and those a script defines later."""
    def wrap_class(cls):
        fn = cls.__dict__.get(name)
        if fn is not None and not getattr(fn, "_tfmpi_wrapped", False):
            setattr(cls, name, wrap(fn))

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
    from keras.src.metrics.metric import Metric
    from keras.src.trainers.trainer import Trainer

    Trainer.get_metrics_result = _wrap_get_metrics_result(Trainer.get_metrics_result)
    wrap_metric_results(Metric, _wrap_result)
    wrap_metric_methods(Metric, "update_state", count_once)
