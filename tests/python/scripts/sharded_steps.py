"""Trains a small model with Adam under the sharded update (or as one
process), steps in a tf.function or eagerly, then saves, loads and saves
again, and writes what every rank held: rank-<r>.json in the folder argv[1]
(tests/python/test_sharded_update.py reads it). Its settings come from the
environment: CLIP (norm: clipnorm, global: global_clipnorm), EAGER, TINY (one
variable), ACCUMULATE (gradient_accumulation_steps), LOSS_SCALE (1: a
LossScaleOptimizer whose scale grows; overflow: one whose gradients overflow
in some steps), LOSS_SCALE_FACTOR (a fixed loss_scale_factor)."""
import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

out, clip = sys.argv[1], os.environ.get("CLIP", "norm")
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
keras.utils.set_random_seed(2)
rng = np.random.default_rng(0)
x = rng.normal(size=(192, 6)).astype("float32")
y = (x[:, :2] @ rng.normal(size=(2, 3))).astype("float32")
if os.environ.get("TINY"):  # one variable: at 2 ranks, rank 1 owns nothing
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, use_bias=False)])
else:
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(24, activation="relu"),
                              keras.layers.Dense(12, activation="relu"), keras.layers.Dense(3)])
kwargs = {"global_clipnorm": 1.0} if clip == "global" else {"clipnorm": 0.5}
if os.environ.get("ACCUMULATE"):
    kwargs["gradient_accumulation_steps"] = 2
if os.environ.get("LOSS_SCALE_FACTOR"):  # a fixed scale: gradients divided by it before the clip
    kwargs["loss_scale_factor"] = 1024.0
opt = keras.optimizers.Adam(0.01, weight_decay=0.01, **kwargs)
if os.environ.get("LOSS_SCALE") == "overflow":
    # Targets 10x larger and a scale so large that some gradients overflow in
    # some steps (skipped, the scale halved) but not in others.
    y *= 10
    opt = keras.optimizers.LossScaleOptimizer(opt, initial_scale=2.0 ** 127, dynamic_growth_steps=2)
elif os.environ.get("LOSS_SCALE"):  # no overflow: the scale grows every 2 steps
    opt = keras.optimizers.LossScaleOptimizer(opt, initial_scale=2.0 ** 15, dynamic_growth_steps=2)
inner = getattr(opt, "inner_optimizer", opt)
loss_fn = keras.losses.MeanSquaredError()
model.compile(opt, loss_fn)  # so that model.save writes the optimizer's state

def step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
        scaled = opt.scale_loss(loss)  # by the loss scale or loss_scale_factor, if any
    grads = tape.gradient(scaled, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss, tf.linalg.global_norm(grads)  # this rank's gradients' norm
if not os.environ.get("EAGER"):
    step = tf.function(step)

losses, norms = [], []
for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).batch(32):
    loss, norm = step(xb, yb)
    losses.append(float(loss)), norms.append(float(norm))
def slots():
    return [np.asarray(v).tolist() for v in inner.variables[2:]]  # after iterations, learning rate
shapes = [list(v.shape) for v in inner.variables[2:]]
before = slots()
under_tfmpi = "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ
if under_tfmpi:
    from tfmpi.transparent import sharded_update
    sharded_update._CHUNK_BYTES = 512  # slots go to the writer in several chunks, some alone
model.save(os.path.join(out, "model.keras"))
after = slots()
owners, during = [], after
if under_tfmpi:
    own = sharded_update._owners.get(inner)  # dealt over the updating optimizer's variables
    owners = [] if own is None else list(own)
    with sharded_update.state_on_rank0():  # what a write sees (Note [State to the writer])
        during = slots()
for v in inner.variables[2:]:  # as a load does: every slot written, on every rank
    v.assign(np.zeros(v.shape, v.dtype))
model.save(os.path.join(out, "after-load.keras"))  # a write empties what the load filled
after_load = [int(np.size(v)) for v in inner.variables[2:]]
loaded = keras.saving.load_model(os.path.join(out, "model.keras"))
json.dump({"loss": losses, "norms": norms, "weights": [w.tolist() for w in model.get_weights()],
           "before": before, "after": after, "during": during, "owners": owners,
           "after_load": after_load, "shapes": shapes,
           "saved": [np.asarray(v).tolist() for v in
                     getattr(loaded.optimizer, "inner_optimizer", loaded.optimizer).variables[2:]],
           "iterations": int(inner.iterations.numpy()),  # (a LossScaleOptimizer's own: 0 before Keras 3.12)
           "scale": float(opt.dynamic_scale.numpy()) if inner is not opt else None},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
