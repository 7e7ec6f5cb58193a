"""tfmpirun --verify: the proof that a script trains under tfmpirun as it does
in one process, step by step.

Note [Proof runs]
tfmpirun --verify runs the script twice, with the same seed and with
TensorFlow's op determinism: as one process (TFMPI_VERIFY=reference), which
records each training step, then at N ranks (TFMPI_VERIFY=compare), whose
rank 0 compares each step with the record as it goes and prints one line per
step: the largest relative difference of the loss and of the weights, and of
every layer's output rows. Both stop after TFMPI_VERIFY_STEPS steps.
A step is one training batch: one step of model.fit (the end of the train
batch, as Keras' callbacks see it), or one batch a custom loop takes from
its dataset (the previous step ends when the next batch is taken).
What a step records:
- the loss: fit's logged loss (Keras' running mean of the epoch); in a
  custom loop, the value of the last target a GradientTape differentiated
  (its sum where it is not a scalar), as the script reads it;
- the weights: every variable of the models fit trains, or of the variables
  a custom loop's tapes differentiated, after the step;
- every layer call's output, as three numbers per row (the row's sum, sum of
  magnitudes and sum of squares; a rank records the rows of its slice,
  placed at its slice's start), so that where a step departs, the first
  layer whose output departs is named: the op or layer where the
  computation differs, not only the variable the difference reached.
Every rank's weights must also be the same (the ranks' records are
gathered to rank 0). The verdict: the same training, or the step where it
departs with the first departing layer and the variable that departs most.
Rank 0 writes the verdict to TFMPI_VERIFY_DIR/verdict.json; tfmpirun
makes it its exit status (3, EXIT_DEPARTS, where the runs depart). The
ranks themselves end normally, so mpirun adds no report of a failed rank. A script that trains
fewer steps than asked is compared over those it trains, and told.
"""

import atexit
import json
import os
import pickle
import sys

import numpy as np

from tfmpi.transparent import state

EXIT_DEPARTS = 3
LOSS_TOL = 1e-5     # relative, as the fidelity tier's per-step losses
WEIGHT_TOL = 1e-4   # relative to the variable's largest value
LAYER_TOL = 1e-4    # relative to the row statistic's size
STATS = 3           # per row of a layer's output: sum, sum of magnitudes, sum of squares

_steps = 0
_models = []        # Keras models whose fit is running (their weights are recorded)
_tape = {}          # id(variable) -> variable, a custom loop's tapes' sources, in order
_layer_calls = []   # the keys of the layer calls of the current step (or trace)
_kept = {}          # what the step's py_function ops kept: "loss", "tapes", "layer <key>"
_tapes_since = 0    # tapes a custom loop ran eagerly since its last step
_told = []          # a layer output that could not be recorded was said
_worst = {"loss": (0.0, 0), "weights": (0.0, 0, ""), "layers": (0.0, 0, "")}
_departed = None    # the first departing step's report, or None
_done = False


def active():
    return state.options is not None and state.options.verify != "off"


def _reference_dir():
    return os.path.join(state.options.verify_dir, "reference")


# ---- recording (both runs)

def _keep(key, value):
    """Runs as a py_function op of the step: keeps a value of this step."""
    _kept[key] = value.numpy()


def _keep_in_step(key, value):
    """`value` kept under `key` each time the step runs (eagerly: now)."""
    import tensorflow as tf

    tf.py_function(lambda v, key=key: _keep(key, v), [value], [])


def record_layer_output(layer, outputs):
    """Keep each row's sum, sum of magnitudes and sum of squares of a layer call's first output
    (the rows of this rank's slice; Note [Proof runs])."""
    import tensorflow as tf

    flat = [t for t in tf.nest.flatten(outputs) if tf.is_tensor(t)]
    if not flat or flat[0].shape.rank is None or flat[0].shape.rank < 1 \
            or not flat[0].dtype.is_floating:
        return
    x = tf.cast(flat[0], tf.float64)
    rows = tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
    stats = tf.stack([tf.reduce_sum(rows, 1), tf.reduce_sum(tf.abs(rows), 1),
                      tf.reduce_sum(tf.square(rows), 1)], 1)
    start, size = _slice_of(tf.shape(x, out_type=tf.int64)[0])
    key = f"{len(_layer_calls):03d} {getattr(layer, 'path', None) or layer.name}"
    _layer_calls.append(key)
    _keep_in_step("layer " + key, tf.concat([tf.cast(tf.stack([start, size]), tf.float64),
                                             tf.reshape(stats, [-1])], 0))


def _slice_of(rows):
    """(start, size) of these rows in the global batch: this rank's slice
    where the rows are its slice's, else (0, rows)."""
    import tensorflow as tf

    if state.size == 1:
        return tf.constant(0, tf.int64), rows
    from tfmpi.transparent import batching

    split = batching.traced_split()
    if split is None or tf.executing_eagerly():
        split = batching.variable_split()
    if split is None:
        return tf.constant(0, tf.int64), rows
    mine = tf.logical_and(split.total > 0, tf.equal(rows, split.size))
    return tf.where(mine, split.start, 0), rows


def record_tape(target, sources):
    """A custom loop's tape differentiated `target` with respect to `sources`."""
    global _tapes_since
    import tensorflow as tf

    for s in tf.nest.flatten(sources):
        if isinstance(s, tf.Variable) and id(s) not in _tape:
            _tape[id(s)] = s
    if tf.is_tensor(target) and target.dtype.is_floating:
        _keep_in_step("loss", tf.reduce_sum(tf.cast(target, tf.float64)))
    if tf.executing_eagerly():
        _tapes_since += 1
    else:
        _keep_in_step("tapes", tf.constant(1.0, tf.float64))


def _weights(variables):
    out, seen = {}, set()
    for v in variables:
        if id(v) in seen:
            continue
        seen.add(id(v))
        name = getattr(v, "path", None) or v.name
        out[f"{len(out):04d} {name}"] = np.array(v.numpy(), np.float64)
    return out


def _layers():
    return {key[len("layer "):]: value for key, value in _kept.items()
            if key.startswith("layer ") and value.size >= 2}


def fit_step_done(model, logs):
    """The end of a training step of model.fit (Keras 3 or tf_keras)."""
    loss = (logs or {}).get("loss")
    _step_done(float(np.asarray(loss)) if loss is not None else float("nan"),
               _weights(model.weights))


def custom_step_done():
    """A custom loop takes its next batch (or its data ended): the step before
    it is done, if a tape differentiated something during it."""
    global _tapes_since
    if not _tapes_since and "tapes" not in _kept:
        return  # nothing was trained since the last step (a loop that only reads)
    _tapes_since = 0
    _kept.pop("tapes", None)
    _step_done(float(_kept.get("loss", np.nan)), _weights(list(_tape.values())))


class _StepIterator:
    """A custom loop's iterator: each batch it hands out after the first ends a step."""

    def __init__(self, inner):
        self._inner = inner
        self._taken = False

    def __iter__(self):
        return self

    def __next__(self):
        import tensorflow as tf

        if not tf.executing_eagerly():
            return next(self._inner)
        if self._taken:
            custom_step_done()
        try:
            element = next(self._inner)
        except StopIteration:
            custom_step_done()
            raise
        self._taken = True
        return element

    def get_next(self):
        return self.__next__()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _step_done(loss, weights):
    global _steps
    if _done:
        return
    _steps += 1
    record = {"loss": loss, "weights": weights, "layers": _layers()}
    del _layer_calls[:]  # the next step's calls (or trace) count from 0 again
    if state.options.verify == "reference":
        os.makedirs(_reference_dir(), exist_ok=True)
        with open(os.path.join(_reference_dir(), f"step-{_steps}.pickle"), "wb") as f:
            pickle.dump(record, f)
    else:
        _compare(record)
    if _steps >= state.options.verify_steps:
        _finish()


# ---- comparing (the N-rank run)

def _gather(record):
    """Every rank's record, on rank 0 (None elsewhere)."""
    import tfmpi

    payload = np.frombuffer(pickle.dumps(record), np.uint8)
    sizes = tfmpi.allgather(np.array([payload.size], np.int64), name="tfmpi/verify/sizes")
    data = tfmpi.allgather(payload, name="tfmpi/verify/data")
    if state.rank != 0:
        return None
    ends = np.cumsum(sizes)
    return [pickle.loads(data[e - n:e].tobytes()) for n, e in zip(sizes, ends)]


def _relative(got, want, floor):
    """max |got - want| relative to want's largest value, or to `floor` where
    that is smaller: a variable that stays near 0 (a bias before a
    BatchNormalization, whose gradient is rounding noise) is judged on the
    scale of the model's weights, not its own."""
    if not want.size:
        return 0.0
    return float(np.abs(got - want).max()) / max(float(np.abs(want).max()), floor)


def _layer_rows(records, key):
    """The global rows of one layer call's statistics, put together from the
    ranks' slices, or None where the ranks' rows do not tile a batch."""
    parts = []
    for r in records:
        value = r["layers"].get(key)
        if value is None:
            return None
        start, size = int(value[0]), int(value[1])
        parts.append((start, size, value[2:].reshape(-1, STATS)))
    total = max(s + n for s, n, _ in parts)
    rows = np.full((total, STATS), np.nan)
    for start, size, stats in parts:
        if len(stats) == size:
            rows[start:start + size] = stats
    return rows


def _compare(record):
    global _departed
    records = _gather(record)
    if state.rank != 0:
        return
    path = os.path.join(_reference_dir(), f"step-{_steps}.pickle")
    if not os.path.exists(path):
        _say(f"step {_steps}: the 1-process run trained fewer steps; nothing to compare")
        return
    with open(path, "rb") as f:
        ref = pickle.load(f)
    loss_off = abs(record["loss"] - ref["loss"]) / max(abs(ref["loss"]), 1e-12)
    if np.isnan(record["loss"]) and np.isnan(ref["loss"]):
        loss_off = 0.0
    weight_off, weight_at = 0.0, ""
    largest = max([float(np.abs(w).max()) for w in ref["weights"].values() if w.size] or [0.0])
    floor = max(0.01 * largest, 1e-6)
    for name, want in ref["weights"].items():
        got = record["weights"].get(name)
        off = np.inf if got is None or got.shape != want.shape else _relative(got, want, floor)
        if off > weight_off:
            weight_off, weight_at = off, name.split(" ", 1)[1]
    ranks_differ = [r for r, other in enumerate(records[1:], 1)
                    if any(not np.array_equal(other["weights"].get(k), v)
                           for k, v in record["weights"].items())]
    first_layer, layer_worst, layer_at = None, 0.0, ""
    for key, want in ref["layers"].items():
        rows = _layer_rows(records, key)
        want = want[2:].reshape(-1, STATS)
        if rows is None or rows.shape != want.shape:
            continue
        # a row's sum is judged against its magnitudes (no cancellation: the rows of a
        # normalised output sum to nearly nothing), the others against themselves
        scale = np.maximum(np.stack([want[:, 1], want[:, 1], want[:, 2]], 1), 1e-12)
        off = float(np.nanmax(np.abs(rows - want) / scale)) if want.size else 0.0
        if off > layer_worst:
            layer_worst, layer_at = off, key.split(" ", 1)[1]
        if off > LAYER_TOL and first_layer is None:
            first_layer = (key.split(" ", 1)[1], off)
    _keep_worst("loss", loss_off)
    _keep_worst("weights", weight_off, weight_at)
    _keep_worst("layers", layer_worst, layer_at)
    _say(f"step {_steps}: loss {record['loss']:.7g} (1 process {ref['loss']:.7g}, {loss_off:.1e} "
         f"relative); weights {weight_off:.1e} ({weight_at or '-'}); layer outputs "
         f"{layer_worst:.1e} ({layer_at or '-'})")
    if ranks_differ:
        _say(f"step {_steps}: the weights of ranks {ranks_differ} differ from rank 0's")
    departs = loss_off > LOSS_TOL or weight_off > WEIGHT_TOL or ranks_differ \
        or first_layer is not None
    if departs and _departed is None:
        where = (f"the first layer whose output departs is {first_layer[0]!r} "
                 f"({first_layer[1]:.1e} relative)" if first_layer else
                 "every layer's output matches, so the update departs")
        _departed = (f"departs from the 1-process run at step {_steps}: {where}; the weights "
                     f"depart most in {weight_at!r} ({weight_off:.1e} relative)")
        if ranks_differ:
            _departed += f"; the weights of ranks {ranks_differ} differ from rank 0's"


def _keep_worst(what, off, where=""):
    if off > _worst[what][0]:
        _worst[what] = (off, _steps, where) if where else (off, _steps)


def _say(text):
    print(f"tfmpi verify: {text}", file=sys.stderr, flush=True)


def _finish():
    """K steps are done (or the script ended): the verdict, then the end."""
    global _done
    if _done:
        return
    _done = True
    if state.options.verify == "reference":
        with open(os.path.join(state.options.verify_dir, "reference.json"), "w") as f:
            json.dump({"steps": _steps}, f)
        _end(0)
    code = EXIT_DEPARTS if _departed else 0
    if state.rank == 0:
        asked = state.options.verify_steps
        short = "" if _steps >= asked else (
            f" (the script trained {_steps} step{'s' if _steps != 1 else ''}, fewer than the "
            f"{asked} asked: it ran out of data or ended)")
        if _steps == 0:
            _say("the script trained no step that tfmpi could see (model.fit, or a custom loop "
                 "over a tf.data dataset with a GradientTape): nothing was compared")
            code = EXIT_DEPARTS
        elif _departed:
            _say(f"{_steps} steps at {state.size} ranks{short}: {_departed}.")
        else:
            (loss, loss_at), (w, w_at, w_name) = _worst["loss"], _worst["weights"]
            _say(f"{_steps} steps at {state.size} ranks{short}: the same training as the "
                 f"1-process run: the largest relative difference of the loss is {loss:.1e} "
                 f"(step {loss_at or '-'}), of the weights {w:.1e} (step {w_at or '-'}, "
                 f"{w_name or '-'}), of a layer's output {_worst['layers'][0]:.1e} "
                 f"(tolerances {LOSS_TOL:g}, {WEIGHT_TOL:g}, {LAYER_TOL:g}).")
        # the verdict, for tfmpirun (which makes it the exit status): the ranks
        # themselves end normally, so that mpirun adds no report of a failed rank
        with open(os.path.join(state.options.verify_dir, "verdict.json"), "w") as f:
            json.dump({"status": code, "steps": _steps}, f)
    _end(0)


def _end(code):
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(code)


def _at_exit():
    """The script ended before its K-th step: the verdict now."""
    if not active() or _done:
        return
    try:
        _finish()
    except SystemExit:
        pass


# ---- hooks

def wrap_layer_call(original):
    import functools

    @functools.wraps(original)
    def __call__(self, *args, **kwargs):
        outputs = original(self, *args, **kwargs)
        try:
            record_layer_output(self, outputs)
        except Exception as e:  # a layer output the statistics cannot take: not recorded
            if not _told and state.rank == 0:
                _say(f"a layer output of {type(self).__name__} is not recorded ({e})")
                _told.append(True)
        return outputs

    return __call__


def wrap_callbacks_batch_end(original):
    import functools

    @functools.wraps(original)
    def on_train_batch_end(self, batch, logs=None):
        result = original(self, batch, logs)
        model = getattr(self, "model", None)
        if model is not None:
            fit_step_done(model, logs)
        return result

    return on_train_batch_end


def wrap_tape_gradient(original):
    import functools

    @functools.wraps(original)
    def gradient(self, target, sources, *args, **kwargs):
        from tfmpi.transparent import loops

        if not loops.inside_keras_loop():
            record_tape(target, sources)
        return original(self, target, sources, *args, **kwargs)

    return gradient


def install_tensorflow():
    if not active():
        return
    import tensorflow as tf
    from tensorflow.python.eager import backprop

    from tensorflow.python.data.ops import dataset_ops

    from tfmpi.transparent import loops

    tf.config.experimental.enable_op_determinism()
    backprop.GradientTape.gradient = wrap_tape_gradient(backprop.GradientTape.gradient)
    original_iter = dataset_ops.DatasetV2.__iter__

    def __iter__(self):
        inner = original_iter(self)
        if loops.inside_keras_loop() or not tf.executing_eagerly():
            return inner
        return _StepIterator(inner)

    dataset_ops.DatasetV2.__iter__ = __iter__
    atexit.register(_at_exit)


def install_keras():
    if not active():
        return
    from keras.src.callbacks.callback_list import CallbackList
    from keras.src.layers.layer import Layer

    Layer.__call__ = wrap_layer_call(Layer.__call__)
    CallbackList.on_train_batch_end = wrap_callbacks_batch_end(CallbackList.on_train_batch_end)


def install_tf_keras():
    if not active():
        return
    from tf_keras.src.callbacks import CallbackList
    from tf_keras.src.engine.base_layer import Layer

    Layer.__call__ = wrap_layer_call(Layer.__call__)
    CallbackList.on_train_batch_end = wrap_callbacks_batch_end(CallbackList.on_train_batch_end)
