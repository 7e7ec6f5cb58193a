"""Global metric results and losses for tf_keras.

Note [Swapped metric state]
tf_keras metrics have no stateless_result. To read the global result, each
state variable is read, the reads are summed over ranks (one grouped op),
the sums are assigned, result() runs, and the local values are assigned back,
so the next update still adds to this rank's own state. In a tf.function the
reads and writes of one variable run in program order (automatic control
dependencies), eagerly they run as written. Summing is right for the additive
state of Keras' built-in metrics (see ../metrics_patches.py); a state whose
aggregation is "mean" or "only_first_replica" is combined as Note [Metric
state aggregation] says.
"""

import tensorflow as tf

from tfmpi.transparent import collectives, flags, metrics_patches, rank0, state

_SUMMABLE = metrics_patches.SUMMABLE


def summable_states(metrics):
    """The metrics' summable state variables, this rank's values of them, and
    what this rank adds to their sums over ranks (Note [Metric state
    aggregation])."""
    metrics_patches.note_script_metrics(metrics)
    variables = [v for m in metrics for v in m.variables if v.dtype in _SUMMABLE]
    local = [tf.identity(tf.convert_to_tensor(v)) for v in variables]
    return variables, local, [metrics_patches.contribution(v, x) for v, x in zip(variables, local)]


def results_from_sums(metrics, read, variables, local, summed):
    """[read(metric)] with `variables` holding the states combined from
    `summed` while they are read, and their `local` values afterwards (Note
    [Swapped metric state])."""
    for v, s in zip(variables, summed):
        v.assign(metrics_patches.combined(v, s))
    with flags.inside("stateless"):
        results = [read(m) for m in metrics]
    # The restores must follow the reads that produced `results`.
    with tf.control_dependencies(tf.nest.flatten(results)):
        for v, s in zip(variables, local):
            v.assign(s)
    return results


def swapped_results(metrics, read):
    """[read(metric)] with every metric's state replaced by its sum over ranks."""
    variables, local, contributions = summable_states(metrics)
    if not variables:
        return [read(m) for m in metrics]
    summed = collectives.allreduce_sum(contributions, "metrics")
    return results_from_sums(metrics, read, variables, local, summed)


def _wrap_get_metrics_result(original):
    def get_metrics_result(self):
        if state.size == 1 or rank0.inside():
            return original(self)
        return metrics_patches.results_dict(
            zip(self.metrics, swapped_results(self.metrics, lambda m: m.result())))

    return get_metrics_result


def _wrap_result(original):
    def result(self):
        if flags.active("stateless") or state.size == 1 or not self.variables or rank0.inside():
            return original(self)
        value, = swapped_results([self], lambda m: original(m))
        return value

    result._tfmpi_wrapped = True
    return result


def install():
    import tf_keras  # noqa: F401  (loads every built-in metric class)
    from tf_keras.src.engine import training
    from tf_keras.src.metrics.base_metric import Metric

    Model = training.Model
    Model.get_metrics_result = _wrap_get_metrics_result(Model.get_metrics_result)
    metrics_patches.wrap_metric_results(Metric, _wrap_result)
    metrics_patches.wrap_metric_methods(Metric, "update_state", metrics_patches.count_once)
