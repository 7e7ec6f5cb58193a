"""Random draws inside a split step are the 1-process draws, cut to the rank's rows.

Note [Random draws under a split batch]
A Dropout mask, Gaussian noise, an augmentation's random flip or crop: inside
a split step each rank holds rows [start, start + s) of a global batch of B
rows, and the 1-process run would draw the noise for all B rows at once. Were
each rank to draw at its slice's shape, every slice would get the first s
rows of that draw (the generator state is the same on every rank), so no rank
would match the 1-process run. So every TensorFlow random op is wrapped: when
the leading dimension of what it draws equals the rank's slice size s, it
draws for the global B rows, from the same generator state as the 1-process
run, and keeps rows [start, start + s). Ops that draw from a shape
(tf.random.*, their stateless forms, tf.random.Generator's methods) get the
global shape; ops that draw for a tensor (tf.nn.dropout and its stateless and
generator forms, tf.image's random flips of a batch of images, categorical's
logits) get the tensor padded with zero rows to
the global batch, then cut back, so their gradient is the local one. This is
what Keras 3 (keras.random.*, every random layer), tf_keras (all three of its
RNG kinds) and a script's own tf.random calls reach.

The leading dimension is recognised by its value (a draw of s rows), checked
when the op runs, so one traced function serves every slice. Draws made while
Keras creates variables (initializers) and inside tf.data functions (input
pipelines run before the batch is split) are never changed. Where the draw
cannot be made exact, a one-time notice says so:
- shuffles (tf.random.shuffle, keras.random.shuffle): a permutation of the
  global batch mixes rows of every rank;
- legacy stateful ops (tf.random.uniform and friends, tf.nn.dropout with a
  seed, tf_keras' default RNG) in a custom loop: their state lives in the
  traced function, and ranks retrace at different steps when their slices
  differ in shape (in model.fit the step sees the global batch and they are
  exact);
- draws whose parameters (alpha, lam, counts, probs) are per-row tensors.
"""

import functools
import inspect
import sys

import tensorflow as tf

from tfmpi.transparent import batching, flags, state

_noticed = set()

NOTICES = {
    "shuffle": "a random shuffle inside a split step permutes the rank's slice only, not the "
               "global batch: its result differs from the 1-process run",
    "legacy": "a legacy stateful random op (tf.random.uniform/normal/..., tf.nn.dropout with a "
              "seed, or tf_keras' default RNG) draws inside a custom loop's split step: its "
              "state lives in the traced function and ranks may retrace at different steps, so "
              "its noise can differ from the 1-process run. Keras 3's random layers and "
              "keras.random.*, tf.random.stateless_* and tf.random.Generator are exact",
    "params": "a random op with per-row parameters (alpha, lam, counts, probs) inside a split "
              "step draws for the rank's slice only: its result differs from the 1-process run",
}


def notice(kind):
    if kind in _noticed:
        return
    _noticed.add(kind)
    if state.rank == 0:
        print(f"tfmpi: note: {NOTICES[kind]} (docs/transparent.md, Random draws).",
              file=sys.stderr)


def not_batch_draws(original):
    """`original` (a variable constructor, a tf.data function tracer) runs with
    the wrapping of random ops off."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        with flags.inside("no_batch_draws"):
            return original(*args, **kwargs)

    wrapper._tfmpi_wrapped = True
    return wrapper


def current_split():
    """(start, size, total) int64 tensors of the split this draw happens
    under (total 0 at run time: not split), and whether it is a custom loop's."""
    if state.size == 1 or flags.active("no_batch_draws") or flags.active("global_draw"):
        return None, False
    traced = batching.traced_split()
    if traced is not None and not tf.executing_eagerly():
        return traced, False
    if not state.custom_split_seen:
        return None, False
    return batching.variable_split(), True


def _rows(split, d0):
    """(rows to draw, offset of this rank's rows) for a draw of d0 rows."""
    d0 = tf.cast(d0, tf.int64)
    is_batch = tf.logical_and(split.total > 0, tf.equal(d0, split.size))
    return tf.where(is_batch, split.total, d0), tf.where(is_batch, split.start, tf.zeros_like(d0))


def _cut(drawn, offset, d0, static_shape):
    out = drawn[offset:offset + tf.cast(d0, tf.int64)]
    if static_shape is not None:
        out.set_shape(static_shape)
    return out


def _prepare(signature, args, kwargs):
    """(split, in a custom loop, bound arguments) for a draw; split None: draw as asked."""
    split, in_custom_loop = current_split()
    if split is None:
        return None, False, None
    return split, in_custom_loop, signature.bind(*args, **kwargs)


def _shape_draw(original, kind, params=()):
    """Wrap an op that draws from `shape`."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        split, in_custom_loop, bound = _prepare(signature, args, kwargs)
        if split is None:
            return original(*args, **kwargs)
        shape = tf.convert_to_tensor(bound.arguments["shape"])
        if shape.shape.rank != 1 or shape.shape[0] == 0:
            return original(*args, **kwargs)
        if any(p in bound.arguments and tf.convert_to_tensor(bound.arguments[p]).shape.rank != 0
               for p in params):
            notice("params")
            return original(*args, **kwargs)
        if kind == "legacy" and in_custom_loop:
            notice("legacy")
        known = tf.get_static_value(shape, partial=True)
        static = tf.TensorShape(None if known is None else [
            None if d is None else int(d) for d in known])
        shape = tf.cast(shape, tf.int64)
        rows, offset = _rows(split, shape[0])
        bound.arguments["shape"] = tf.concat([tf.reshape(rows, [1]), shape[1:]], axis=0)
        with flags.inside("global_draw"):
            drawn = original(*bound.args, **bound.kwargs)
        return _cut(drawn, offset, shape[0], static)

    wrapper._tfmpi_wrapped = True
    return wrapper


def _padded_draw(original, arg, kind, noise_arg=None, rank=None):
    """Wrap an op that draws for the rows of tensor argument `arg` (only when
    it has rank `rank`, if given: an image op's batch of images)."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        split, in_custom_loop, bound = _prepare(signature, args, kwargs)
        if split is None:
            return original(*args, **kwargs)
        x = tf.convert_to_tensor(bound.arguments[arg])
        if x.shape.rank is None or x.shape.rank == 0 or (rank is not None and x.shape.rank != rank):
            return original(*args, **kwargs)
        if kind == "legacy" and in_custom_loop:
            notice("legacy")
        d0 = tf.shape(x, out_type=tf.int64)[0]
        rows, offset = _rows(split, d0)
        padding = [[offset, rows - offset - d0]] + [[0, 0]] * (x.shape.rank - 1)
        bound.arguments[arg] = tf.pad(x, padding)
        noise = bound.arguments.get(noise_arg) if noise_arg else None
        if noise is not None:
            noise = tf.cast(tf.convert_to_tensor(noise), tf.int64)
            first = tf.where(tf.equal(noise[0], d0), rows, noise[0])
            bound.arguments[noise_arg] = tf.concat([tf.reshape(first, [1]), noise[1:]], axis=0)
        with flags.inside("global_draw"):
            drawn = original(*bound.args, **bound.kwargs)
        return _cut(drawn, offset, d0, None)

    wrapper._tfmpi_wrapped = True
    return wrapper


def _shuffle(original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if current_split()[0] is not None:
            notice("shuffle")
        return original(*args, **kwargs)

    wrapper._tfmpi_wrapped = True
    return wrapper


_SHAPE_OPS = {  # tf.random.<name>: (kind, per-row parameters that disable the wrap)
    "uniform": ("legacy", ()), "normal": ("legacy", ()), "truncated_normal": ("legacy", ()),
    "gamma": ("legacy", ("alpha", "beta")), "poisson": ("legacy", ("lam",)),
    "stateless_uniform": ("stateless", ()), "stateless_normal": ("stateless", ()),
    "stateless_truncated_normal": ("stateless", ()),
    "stateless_binomial": ("stateless", ("counts", "probs")),
    "stateless_gamma": ("stateless", ("alpha", "beta")),
    "stateless_poisson": ("stateless", ("lam",)),
}
_GENERATOR_OPS = {"normal": (), "uniform": (), "truncated_normal": (), "uniform_full_int": (),
                  "binomial": ("counts", "probs")}


def _replace(owner, name, wrap):
    original = getattr(owner, name, None)
    if original is not None and not getattr(original, "_tfmpi_wrapped", False):
        setattr(owner, name, wrap(original))


def replace_api(owner, name, wrap):
    """Like _replace, in every namespace of TensorFlow's API that exports the
    same function (tf_keras reaches tf.nn through tf.compat.v2, a module of its own)."""
    original = getattr(owner, name, None)
    if original is None or getattr(original, "_tfmpi_wrapped", False):
        return
    wrapped = wrap(original)
    for module_name, module in list(sys.modules.items()):
        if module is not None and module_name.startswith("tensorflow._api.") \
                and getattr(module, name, None) is original:
            setattr(module, name, wrapped)
    setattr(owner, name, wrapped)


def install_tensorflow(tf_module):
    if state.size == 1 or state.options.batch_mode != "global":
        return
    from tensorflow.python.data.ops import structured_function

    random = tf_module.random
    for name, (kind, params) in _SHAPE_OPS.items():
        replace_api(random, name, lambda f, kind=kind, params=params: _shape_draw(f, kind, params))
    for name, params in _GENERATOR_OPS.items():
        _replace(random.Generator, name, lambda f, params=params: _shape_draw(f, "generator", params))
    replace_api(random, "categorical", lambda f: _padded_draw(f, "logits", "legacy"))
    replace_api(random, "stateless_categorical", lambda f: _padded_draw(f, "logits", "stateless"))
    replace_api(tf_module.nn, "dropout", lambda f: _padded_draw(f, "x", "legacy", "noise_shape"))
    experimental = tf_module.nn.experimental
    replace_api(experimental, "stateless_dropout",
                 lambda f: _padded_draw(f, "x", "stateless", "noise_shape"))
    replace_api(experimental, "general_dropout",
                 lambda f: _padded_draw(f, "x", "generator", "noise_shape"))
    for name, kind in (("stateless_random_flip_left_right", "stateless"),
                       ("stateless_random_flip_up_down", "stateless"),
                       ("random_flip_left_right", "legacy"), ("random_flip_up_down", "legacy")):
        replace_api(tf_module.image, name, lambda f, kind=kind: _padded_draw(f, "image", kind, rank=4))
    replace_api(random, "shuffle", _shuffle)
    replace_api(random.experimental, "stateless_shuffle", _shuffle)
    Wrapper = structured_function.StructuredFunctionWrapper
    _replace(Wrapper, "__init__", not_batch_draws)


def install_keras():
    if state.size == 1 or state.options.batch_mode != "global":
        return
    from keras.src.backend.tensorflow import core, random

    _replace(random, "shuffle", _shuffle)
    _replace(core.Variable, "_initialize_with_initializer", not_batch_draws)


def install_tf_keras():
    if state.size == 1 or state.options.batch_mode != "global":
        return
    from tf_keras.src.engine import base_layer

    _replace(base_layer.Layer, "add_weight", not_batch_draws)
