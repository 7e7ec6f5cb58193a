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
pipelines run before the batch is split) are never changed. Two kinds of
draw need the other ranks' rows, which are allgathered first (one collective
per draw, only where the draw has them):
- a shuffle of the batch's rows (tf.random.shuffle, stateless_shuffle,
  keras.random.shuffle): the 1-process permutation of the global batch, cut
  to the rank's rows;
- parameters given per row (counts, probs, alpha, lam of stateless_binomial,
  stateless_gamma, stateless_poisson, Generator.binomial; keras.random.gamma,
  binomial, beta): the draw takes the global batch's parameters.
Where a draw cannot be made exact, rank 0 says so once per op, naming the op
and the layer (the name scope) it is drawn in:
- a shuffle of a 1-D integer tensor (a permutation of the slice's indices,
  with which the script then gathers its own rows: the 1-process permutation
  would index rows that other ranks hold);
- the legacy gamma and poisson with per-row parameters (their output puts the
  parameters' rows last);
- legacy stateful ops (tf.random.uniform and friends, tf.nn.dropout with a
  seed, tf_keras' default RNG) in a custom loop: their state lives in the
  op's kernel, which TensorFlow makes anew when a function retraces for a new
  input shape. A rank retraces for its slice's shape, the 1-process run for
  the batch's; where they change at different steps (a ragged last batch of
  3 rows at 2 ranks leaves rank 0 a slice of 2 rows, as before, so rank 0
  keeps the kernel that the 1-process run replaces) the draws differ. In
  model.fit the step takes the global batch (it is split inside the traced
  function), so these ops retrace as in the 1-process run and are exact.
"""

import functools
import inspect
import sys

import tensorflow as tf

from tfmpi.transparent import batching, flags, state

_noticed = set()

NOTICES = {
    "shuffle": "permutes indices of the rank's slice (a 1-D integer tensor), not of the global "
               "batch, and the script then gathers rows of its slice with them: its result "
               "differs from the 1-process run (a shuffle of the batch's rows themselves is exact)",
    "legacy": "is a legacy stateful random op (tf_keras' default RNG is one) drawing inside a "
              "custom loop's split step: its state lives in the op's kernel, which TensorFlow "
              "makes anew when a function retraces for a new input shape, and a rank retraces "
              "for its slice's shape where the 1-process run retraces for the batch's (a ragged "
              "last batch that leaves a rank's slice as it was), so its noise can differ from "
              "the 1-process run. Keras 3's random layers, keras.random.*, "
              "tf.random.stateless_* and tf.random.Generator are exact; in tf_keras, "
              "tf.keras.backend.experimental.enable_tf_random_generator() makes its layers use "
              "a Generator",
    "params": "draws with per-row parameters (alpha, lam) in the legacy op, whose output puts "
              "the parameters' rows last: it draws for the rank's slice only, and its result "
              "differs from the 1-process run (tf.random.stateless_gamma / stateless_poisson / "
              "stateless_binomial and Generator.binomial with per-row parameters are exact)",
}


def notice(kind, op):
    """Rank 0 says once per kind and op that a draw is not the 1-process draw,
    naming the op and the layer (the name scope) it was drawn in."""
    import tensorflow as tf

    if (kind, op) in _noticed:
        return
    _noticed.add((kind, op))
    scope = tf.get_current_name_scope().rstrip("/")
    where = f" in {scope!r}" if scope else ""
    if state.rank == 0:
        print(f"tfmpi: note: {op}{where} {NOTICES[kind]} (docs/transparent.md, Random draws).",
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


def _shape_draw(original, kind, params=(), public=None):
    """Wrap an op that draws from `shape` (`public`: its name in TensorFlow's API)."""
    public = public or original.__name__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        split, in_custom_loop, bound = _prepare(signature, args, kwargs)
        if split is None:
            return original(*args, **kwargs)
        shape = tf.convert_to_tensor(bound.arguments["shape"])
        if shape.shape.rank != 1 or shape.shape[0] == 0:
            return original(*args, **kwargs)
        per_row = [p for p in params if p in bound.arguments
                   and tf.convert_to_tensor(bound.arguments[p]).shape.rank not in (0, None)]
        if per_row and kind == "legacy":  # its output's shape is `shape` + the parameters'
            notice("params", public)
            return original(*args, **kwargs)
        if kind == "legacy" and in_custom_loop:
            notice("legacy", public)
        known = tf.get_static_value(shape, partial=True)
        static = tf.TensorShape(None if known is None else [
            None if d is None else int(d) for d in known])
        shape = tf.cast(shape, tf.int64)
        rows, offset = _rows(split, shape[0])
        bound.arguments["shape"] = tf.concat([tf.reshape(rows, [1]), shape[1:]], axis=0)
        for p in per_row:  # parameters broadcast to the shape: the batch's rows of them too
            bound.arguments[p] = _global_rows(bound.arguments[p], split, shape[0])
        with flags.inside("global_draw"):
            drawn = original(*bound.args, **bound.kwargs)
        return _cut(drawn, offset, shape[0], static)

    wrapper._tfmpi_wrapped = True
    return wrapper


def _padded_draw(original, arg, kind, noise_arg=None, rank=None, public=None):
    """Wrap an op that draws for the rows of tensor argument `arg` (only when
    it has rank `rank`, if given: an image op's batch of images)."""
    public = public or original.__name__
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
            notice("legacy", public)
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


def _global_rows(t, split, d0):
    """The global batch's rows of `t`, which holds this rank's d0 rows when its
    leading dimension is the slice's (the ranks' rows allgathered in rank
    order; where every rank holds the whole batch, rank 0's), else `t`."""
    from tfmpi.tensorflow import ops as tops
    from tfmpi.transparent import naming

    t = tf.convert_to_tensor(t)
    gathered = tops.allgather(t, name=naming.name("random_rows"))
    rows = tf.shape(t, out_type=tf.int64)[0]
    is_batch = tf.logical_and(tf.logical_and(split.total > 0, tf.equal(rows, split.size)),
                              tf.equal(rows, tf.cast(d0, tf.int64)))
    return tf.cond(is_batch, lambda: gathered[:split.total], lambda: t)


def _shuffle(original, public):
    """A shuffle of the batch's rows inside a split step: the 1-process
    permutation of the global batch (the ranks' rows allgathered), cut to the
    rank's rows. A 1-D integer tensor (indices of the slice, which the script
    then gathers its rows with) is shuffled as it is, with a notice: the
    1-process run's permutation would index rows other ranks hold."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        split, _, bound = _prepare(signature, args, kwargs)
        if split is None:
            return original(*args, **kwargs)
        x = tf.convert_to_tensor(bound.arguments["value"])
        if x.shape.rank is None or x.shape.rank == 0:
            return original(*args, **kwargs)
        if x.shape.rank == 1 and x.dtype.is_integer:
            notice("shuffle", public)
            return original(*args, **kwargs)
        d0 = tf.shape(x, out_type=tf.int64)[0]
        _, offset = _rows(split, d0)
        bound.arguments["value"] = _global_rows(x, split, d0)
        with flags.inside("global_draw"):
            drawn = original(*bound.args, **bound.kwargs)
        return _cut(drawn, offset, d0, x.shape)

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
        if module is not None and (module_name == "tensorflow"
                                   or module_name.startswith("tensorflow._api.")) \
                and getattr(module, name, None) is original:
            setattr(module, name, wrapped)
    setattr(owner, name, wrapped)


def install_tensorflow(tf_module):
    if state.size == 1 or state.options.batch_mode != "global":
        return
    from tensorflow.python.data.ops import structured_function

    random = tf_module.random
    for name, (kind, params) in _SHAPE_OPS.items():
        replace_api(random, name, lambda f, kind=kind, params=params, name=name:
                    _shape_draw(f, kind, params, f"tf.random.{name}"))
    for name, params in _GENERATOR_OPS.items():
        _replace(random.Generator, name, lambda f, params=params, name=name:
                 _shape_draw(f, "generator", params, f"tf.random.Generator.{name}"))
    # seeds for stateless ops (tf_keras' random layers take one per call) and new
    # generators are drawn through uniform_full_int, never for a batch's rows: a
    # seed drawn for one row's slice was taken for batch rows
    for name in ("make_seeds", "split"):
        _replace(random.Generator, name, not_batch_draws)
    replace_api(random, "categorical",
                lambda f: _padded_draw(f, "logits", "legacy", public="tf.random.categorical"))
    replace_api(random, "stateless_categorical",
                lambda f: _padded_draw(f, "logits", "stateless",
                                       public="tf.random.stateless_categorical"))
    replace_api(tf_module.nn, "dropout",
                lambda f: _padded_draw(f, "x", "legacy", "noise_shape", public="tf.nn.dropout"))
    experimental = tf_module.nn.experimental
    replace_api(experimental, "stateless_dropout",
                lambda f: _padded_draw(f, "x", "stateless", "noise_shape",
                                       public="tf.nn.experimental.stateless_dropout"))
    replace_api(experimental, "general_dropout",
                lambda f: _padded_draw(f, "x", "generator", "noise_shape",
                                       public="tf.nn.experimental.general_dropout"))
    for name, kind in (("stateless_random_flip_left_right", "stateless"),
                       ("stateless_random_flip_up_down", "stateless"),
                       ("random_flip_left_right", "legacy"), ("random_flip_up_down", "legacy")):
        replace_api(tf_module.image, name, lambda f, kind=kind, name=name:
                    _padded_draw(f, "image", kind, rank=4, public=f"tf.image.{name}"))
    replace_api(random, "shuffle", lambda f: _shuffle(f, "tf.random.shuffle"))
    replace_api(random.experimental, "stateless_shuffle",
                lambda f: _shuffle(f, "tf.random.experimental.stateless_shuffle"))
    Wrapper = structured_function.StructuredFunctionWrapper
    _replace(Wrapper, "__init__", not_batch_draws)


def install_keras():
    if state.size == 1 or state.options.batch_mode != "global":
        return
    from keras.src.backend.tensorflow import core

    # keras.random.shuffle calls tf.random.experimental.stateless_shuffle (wrapped)
    _replace(core.Variable, "_initialize_with_initializer", not_batch_draws)


def install_tf_keras():
    if state.size == 1 or state.options.batch_mode != "global":
        return
    from tf_keras.src.engine import base_layer

    _replace(base_layer.Layer, "add_weight", not_batch_draws)
