"""Gradient reduction for tf_keras optimizers, in apply_gradients.

Every tf_keras training path reaches apply_gradients (minimize calls it; so
does Model.train_step). Its optimizers clip and decay inside apply_gradients
(the new ones, optimizer.Optimizer) or in the transforms it runs (the legacy
OptimizerV2), so reducing on entry lets them see the global gradient. The
LossScaleOptimizers call their inner optimizer's apply_gradients: as for
Keras 3 only the outermost call reduces (../optimizer_patches.py).
"""

from tfmpi.transparent import gradient_tape, optimizer_patches, sharded_update


def wrap_apply_gradients(original):
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        if optimizer_patches.passes_through():
            return original(self, grads_and_vars, *args, **kwargs)
        if sharded_update.enabled():
            sharded_update.tell("tf_keras optimizers are not sharded")
        pairs = list(grads_and_vars)
        if not pairs:
            return original(self, pairs, *args, **kwargs)
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        if gradient_tape.reduced_for(variables):  # Note [Gradients reduced at the tape]
            with optimizer_patches.reducing():
                return original(self, pairs, *args, **kwargs)
        reduced = optimizer_patches.reduced_gradients(self, grads, variables)
        with optimizer_patches.reducing():
            return original(self, list(zip(reduced, variables)), *args, **kwargs)

    apply_gradients._tfmpi_wrapped = True
    return apply_gradients


def _classes_defining_apply_gradients(roots):
    seen, todo = set(), list(roots)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in seen if "apply_gradients" in c.__dict__]


def install():
    import tf_keras  # noqa: F401  (loads every built-in optimizer)
    from tf_keras.src.mixed_precision import loss_scale_optimizer
    from tf_keras.src.optimizers import optimizer
    from tf_keras.src.optimizers.legacy import optimizer_v2

    roots = (optimizer._BaseOptimizer, optimizer_v2.OptimizerV2,
             loss_scale_optimizer.BaseLossScaleOptimizer)
    for cls in _classes_defining_apply_gradients(roots):
        method = cls.__dict__["apply_gradients"]
        if not getattr(method, "_tfmpi_wrapped", False):
            cls.apply_gradients = wrap_apply_gradients(method)
