"""TensorFlow without Keras, in the style of TensorFlow's "basic training loops"
guide: a tf.Module holding tf.Variables, a loss written by hand with
tf.reduce_mean, gradients from tf.GradientTape, over a shuffled, batched
tf.data pipeline (1797 digits in batches of 48: a ragged last batch). Four
trainings in a row, each with its own module, plain SGD (which a wrong
gradient scale would show) and the loss each step returns recorded as the
script reads it:
  1. a tf.function step updating by hand, v.assign_sub(lr * g);
  2. an eager step (no tf.function) with a Keras optimizer (SGD with momentum);
  3. gradients of two batches accumulated, then one update by hand;
  4. gradients clipped by their global norm, then applied by a Keras optimizer.
Usage: train_tf_module.py OUT_DIR"""

import numpy as np
import tensorflow as tf

import common
from common import keras

common.setup_determinism()
keras.utils.set_random_seed(11)
x, y = common.digits()
LR = 0.2


class Mlp(tf.Module):
    def __init__(self, seed):
        super().__init__()
        init = tf.random.stateless_normal
        self.w1 = tf.Variable(init([64, 32], seed=[seed, 1]) * 0.2, name="w1")
        self.b1 = tf.Variable(tf.zeros([32]), name="b1")
        self.w2 = tf.Variable(init([32, 10], seed=[seed, 2]) * 0.2, name="w2")
        self.b2 = tf.Variable(tf.zeros([10]), name="b2")

    def __call__(self, inputs):
        return tf.matmul(tf.tanh(tf.matmul(inputs, self.w1) + self.b1), self.w2) + self.b2

    def get_weights(self):  # for common.write_run
        return [v.numpy() for v in self.trainable_variables]


def loss_of(model, xb, yb):
    labels = tf.cast(yb, tf.int32)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, model(xb)))


def dataset(seed):
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000, seed=seed).batch(48)


def by_hand(seed):
    model = Mlp(seed)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_of(model, xb, yb)
        for v, g in zip(model.trainable_variables, tape.gradient(loss, model.trainable_variables)):
            v.assign_sub(LR * g)
        return loss

    losses = [float(step(xb, yb)) for xb, yb in dataset(seed)]
    common.collect(losses, model)


def eager_with_optimizer(seed):
    model = Mlp(seed)
    optimizer = keras.optimizers.SGD(LR / 2, momentum=0.9)
    losses = []
    for xb, yb in dataset(seed):
        with tf.GradientTape() as tape:
            loss = loss_of(model, xb, yb)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
    common.collect(losses, model)


def accumulated(seed):
    model = Mlp(seed)
    total = [tf.Variable(tf.zeros_like(v)) for v in model.trainable_variables]

    @tf.function
    def accumulate(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_of(model, xb, yb)
        for t, g in zip(total, tape.gradient(loss, model.trainable_variables)):
            t.assign_add(g)
        return loss

    @tf.function
    def update(batches):
        for v, t in zip(model.trainable_variables, total):
            v.assign_sub(LR * t / batches)
            t.assign(tf.zeros_like(t))

    losses, pending = [], 0
    for xb, yb in dataset(seed):
        losses.append(float(accumulate(xb, yb)))
        pending += 1
        if pending == 2:
            update(2.0)
            pending = 0
    if pending:
        update(float(pending))
    common.collect(losses, model)


def clipped(seed):
    model = Mlp(seed)
    optimizer = keras.optimizers.SGD(LR)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_of(model, xb, yb)
        grads, norm = tf.clip_by_global_norm(tape.gradient(loss, model.trainable_variables), 0.5)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, norm

    losses, norms = [], []
    for xb, yb in dataset(seed):
        loss, norm = step(xb, yb)
        losses.append(float(loss))
        norms.append(float(norm))
    common.collect(losses, model, extra=norms)


by_hand(1)
eager_with_optimizer(2)
accumulated(3)
clipped(4)
common.write_run()
print("STEPS", np.size(common._run["losses"]), flush=True)
