"""tf_keras' own train_step, with its collectives in one grouped op.

As for Keras 3 (Note [One collective per step], ../keras_step.py): tf_keras'
train_step applies the gradients (one collective, in apply_gradients) and
then updates the compiled metrics and reads every metric's result, which sums
the metric states over ranks (Note [Swapped metric state], metrics.py): a
second collective that waits for the first. Where the model keeps tf_keras'
own train_step, compute_loss, compute_metrics and get_metrics_result, the step
below updates the compiled metrics from the predictions before minimize (they
do not depend on the update), the metric states ride in the gradients'
grouped allreduce, and the results are read from the summed states. Losses
stay local (Note [Local losses in Keras' own steps], ../steps.py).
"""

import tensorflow as tf

from tfmpi.transparent import collectives, metrics_patches
from tfmpi.transparent.legacy_keras import metrics as legacy_metrics


def fused_train_step(model):
    """tf_keras' Model.train_step for `model`, with one collective."""
    from tf_keras.src.engine import data_adapter

    def train_step(data):
        x, y, sample_weight = data_adapter.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x, y, y_pred, sample_weight)
        model._validate_target_and_loss(y, loss)
        model.compiled_metrics.update_state(y, y_pred, sample_weight)
        metrics = model.metrics
        variables, local, contributions = legacy_metrics.summable_states(metrics)
        with collectives.riding_with_gradients(contributions) as riders:
            model.optimizer.minimize(loss, model.trainable_variables, tape=tape)
        summed = riders.reduced
        if variables and summed is None:  # no gradient was reduced
            summed = collectives.allreduce_sum(contributions, "metrics")
        results = legacy_metrics.results_from_sums(metrics, lambda m: m.result(), variables,
                                                   local, summed or [])
        return metrics_patches.results_dict(zip(metrics, results))

    return train_step
