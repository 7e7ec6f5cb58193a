"""Keras 3's own train_step, with its collectives in one grouped op.

Note [One collective per step]
Keras' train_step updates the loss tracker, applies the gradients (the
optimizer wrapper sums them over ranks, Note [Where gradients are reduced])
and only then updates the compiled metrics and reads every metric's result,
which sums the metric states over ranks (Note [Global metrics]): two
collectives in a row, each waiting for its own engine cycle. Where the model
uses Keras' own train_step, compute_loss, compute_metrics and
get_metrics_result, the step below does what Keras' does in an order that
needs one: the compiled metrics are updated from the predictions before the
gradients are applied (they do not depend on the update), and the metric
states ride in the gradients' grouped allreduce
(collectives.riding_with_gradients); the results are computed from the summed
states. Losses stay local (Note [Local losses in Keras' own
steps], steps.py), so the step runs one collective in all (plus the sparse
gradients' allgathers). What the step computes and returns is unchanged:
the metric updates read the same predictions, and the results the same sums.
A train_step, compute_loss, compute_metrics or get_metrics_result the script
overrides runs as written.
"""

import warnings

import tensorflow as tf

from tfmpi.transparent import collectives, metrics_patches


def fused_train_step(model):
    """Keras 3's TensorFlowTrainer.train_step for `model`, with one collective."""
    from keras.src import tree
    from keras.src.losses import loss as loss_module
    from keras.src.trainers.data_adapters import data_adapter_utils

    def train_step(data):
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
            loss = model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                       training=True)
            model._loss_tracker.update_state(
                loss_module.unscale_loss_for_distribution(loss),
                sample_weight=tf.shape(next(i for i in tree.flatten(x) if i is not None))[0])
            if model.optimizer is not None:
                loss = model.optimizer.scale_loss(loss)
        if model._compile_metrics is not None:
            model._compile_metrics.update_state(y, y_pred, sample_weight)
        metrics = model.metrics
        variables, values, summable = metrics_patches.summable_states(metrics)
        reduced = None
        if model.trainable_weights:
            trainable_weights = model.trainable_weights
            gradients = tape.gradient(loss, trainable_weights)
            with collectives.riding_with_gradients([values[i] for i in summable]) as riders:
                model.optimizer.apply_gradients(zip(gradients, trainable_weights))
            reduced = riders.reduced
        else:
            warnings.warn("The model does not have any trainable weights.")
        if summable and reduced is None:  # nothing was reduced with gradients
            reduced = collectives.allreduce_sum([values[i] for i in summable], "metrics")
        metrics_patches.combine(variables, values, summable, reduced or [])
        return metrics_patches.logs_from_results(
            metrics_patches.results_from_states(metrics, values))

    return train_step
