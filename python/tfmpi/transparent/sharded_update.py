"""The sharded optimizer update (TFMPI_SHARDED_UPDATE=1): each rank applies
the optimizer to the variables it owns, not to all of them.

Note [Sharded update]
Every trainable variable of an optimizer has one owner, dealt once over the
list the optimizer was built with (largest first, each to the rank holding the
fewest bytes so far): the same on every rank, and it never changes. A step:
- the weighted gradients (batching.py) are summed onto their owners, one
  grouped reduce that the engine runs as reduce-scatters over the fused small
  ones (Note [Owner layout] in src/tfmpi/planning/owner_layout.h) and as a
  reduce to its owner for each large one;
- each rank runs the optimizer's apply on the variables it owns, with their
  global gradients, so per-variable clipping, weight decay, constraints and the
  update are the 1-process ones;
- every variable's new value comes from its owner, one grouped broadcast that
  the engine runs as allgathers, received straight into the variables
  (TfmpiOwnersBroadcastVariables: no copy of the values made and assigned).
That moves the bytes of one allreduce (a reduce-scatter and an allgather), and
each rank computes about 1/N of the update. The iteration counter advances on
every rank (a rank that owns nothing counts the step itself, as Keras' apply
returns early without gradients).

Optimizer state: only the owner keeps a variable's slots (momenta,
accumulators) while sharded steps run; Note [Owned state].

With global_clipnorm, the norm is of every gradient: each rank sums the
squares of the gradients it owns, one scalar allreduce adds those up, and
each owner unscales (loss_scale_factor) and scales its gradients as Keras
would before its apply runs with both off (only the order of the sum differs
from one process).

With a LossScaleOptimizer the finite check is of every gradient: each rank
checks the gradients it owns, one scalar allreduce counts the ranks that saw
an overflow, and every rank runs the same one of its two steps (finite:
unscale, update, count towards growth; non-finite: halve the scale), so the
scale and its counter are the same everywhere; only the inner optimizer's
slots are sharded.

The whole update runs on every rank instead (said once, with the reason) with
gradient_accumulation_steps, a LossScaleOptimizer whose inner optimizer has
global_clipnorm (the clip is inside its finite step), use_ema (the averages
read every variable before the new values arrive), sparse gradients
(IndexedSlices), variables of dtypes the engine does not move, and optimizers
with state not made per variable (Adafactor's factored moments). The choice
is made at an optimizer's first update: a later update of a sharded optimizer
that can't be sharded (sparse gradients, say) stops with an error naming
TFMPI_SHARDED_UPDATE=0. tf_keras optimizers are not sharded.
"""

import contextlib
import sys
import weakref

import numpy as np
import tensorflow as tf

from tfmpi.transparent import collectives, state

_owners = weakref.WeakKeyDictionary()  # updating optimizer -> owner rank per built variable index
_slots = weakref.WeakKeyDictionary()   # optimizer -> [(variable, slot)] from add_variable_from_reference
_sharded = []                          # optimizers that took a sharded step, in order (every rank alike)
_told = set()


# Note [Owned state]
# Each rank empties the slots of the variables other ranks own as the
# optimizer makes them, where a sharded update builds it (its first update,
# within fit's first step or a custom loop's): the Keras variable keeps its
# shape and dtype, but its storage becomes a tf.Variable of no fixed shape
# (made once per slot, in place of the one Keras made, so the memory is freed)
# holding no elements. So while steps run, the first included, no rank holds
# the whole state (a write and the end of fit fill it, below). An optimizer
# built before (by hand, or by a load) keeps every slot until its first
# sharded update empties them. Where the update can't be sharded after all
# (state not made per variable, found once built), the slots its build
# emptied get their initial values back (made by their initializers, as Keras
# made them) before the full update runs. Once updates are sharded, the step
# never reads those slots. (A tf.function traced before the first sharded
# update that reads them keeps their storage alive.) A write (Note [Rank-0
# sections], rank0.py) is rank 0's alone: before it, rank 0 gets the current
# value of every slot other ranks own (Note [State to the writer]) and after it
# empties again the slots that were empty before, so saved files hold the
# 1-process run's state; the other ranks fill nothing. When fit returns (not when it
# raises) they are filled and stay so (the state fit leaves is the 1-process
# run's); the next fit empties them at its start. A restore or an assign (a
# load, BackupAndRestore's restore) fills the slots it writes, which stay
# filled (stale) until the next write or fit empties them. So while steps run, a rank's optimizer
# state is about 1/N of the whole (as evenly as the deal splits the bytes), and
# optimizer.variables read then gives empty arrays for slots of variables other
# ranks own. The broadcast of rank 0's state when a train function is made
# (steps.sync_model_state) leaves the slots of sharded optimizers out: their
# owners hold them, and rank 0 holds some empty.


def enabled():
    return state.size > 1 and state.options is not None and state.options.sharded_update


def updated_by_owners(variable):
    """True where an optimizer that took a sharded step updates `variable`
    (its gradient goes to its owner: Note [Gradients reduced at the tape])."""
    return any(v is variable for opt in _sharded for v in _updating(opt)._trainable_variables)


def _loss_scaled(opt):
    from keras.src.optimizers.loss_scale_optimizer import LossScaleOptimizer

    return isinstance(opt, LossScaleOptimizer)


def _updating(opt):
    """The optimizer that updates the variables: a LossScaleOptimizer's inner one."""
    return opt.inner_optimizer if _loss_scaled(opt) else opt


def _why_not(opt, grads, variables):
    """Why this update of `opt` can't be sharded, or None."""
    if not opt.built and not variables:
        return "the optimizer is not built"  # Keras' own apply says what is wrong
    inner = _updating(opt)
    if _loss_scaled(opt):
        if not all(hasattr(opt, m) for m in ("_stateful_handle_finite_grads",
                                             "_stateful_handle_non_finite_grads")):
            return "this Keras' LossScaleOptimizer has no finite and non-finite steps of its own"
        if getattr(inner, "global_clipnorm", None):
            return "a LossScaleOptimizer clips by global norm inside its finite step"
    if getattr(inner, "gradient_accumulation_steps", None):
        return "gradient_accumulation_steps (the accumulated updates are not sharded)"
    if getattr(inner, "use_ema", False):
        return "use_ema averages every variable"
    if any(isinstance(g, tf.IndexedSlices) for g in grads):
        return "sparse gradients (IndexedSlices)"
    if any(tf.as_dtype(v.dtype) not in collectives.NATIVE for v in variables):
        return "a variable of a dtype the engine does not move"
    return None


def tell(reason):
    if reason not in _told:
        _told.add(reason)
        if state.rank == 0:
            print(f"tfmpi: the optimizer update runs in full on every rank (TFMPI_SHARDED_UPDATE): "
                  f"{reason}", file=sys.stderr)


def _bytes(v):
    return int(np.prod(v.shape, dtype=np.int64)) * tf.as_dtype(v.dtype).size


def deal_owners(sizes, ranks):
    """Owner rank of each of `sizes` (bytes): largest first, each to the rank
    with the fewest bytes so far (the lowest such rank on a tie)."""
    load = [0] * ranks
    owners = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = min(range(ranks), key=lambda r: (load[r], r))
        owners[i] = r
        load[r] += sizes[i]
    return owners


def _owner_of(opt):
    """Owner rank of each variable `opt` updates, dealt over the variables its
    updating optimizer is built on (a LossScaleOptimizer's own list stays
    empty before Keras 3.12)."""
    opt = _updating(opt)
    owners = _owners.get(opt)
    if owners is None:
        owners = deal_owners([_bytes(v) for v in opt._trainable_variables], state.size)
        _owners[opt] = owners
    return lambda v: owners[opt._get_variable_index(v)]


def _build(opt, variables):
    """Builds `opt` on all of `variables` (as its apply would), every slot on
    every rank. Eagerly also while a step is traced: variables made inside a
    tf.function stay referenced by it, so emptying a slot would not free its
    memory (Note [Owned state])."""
    if opt.built:
        return
    from keras.src import backend

    _updating(opt)._tfmpi_shard_at_build = True  # record_slot empties the slots others own
    try:
        with tf.init_scope(), backend.name_scope(opt.name, caller=opt):
            opt.build(variables)
    finally:
        _updating(opt)._tfmpi_shard_at_build = False
    opt.built = True


def _counter(opt):
    """The updating optimizer's step counter variable (its `iterations` is a
    computed tensor with gradient accumulation)."""
    opt = _updating(opt)
    counter = getattr(opt, "_iterations", None)
    return opt.iterations if counter is None else counter


def _unrecorded_slots(opt):
    """Variables of the updating optimizer other than the step counter and
    learning rate that add_variable_from_reference did not make (so no owner
    is known for them). A LossScaleOptimizer's own scale and counter are the
    same on every rank: every rank runs its finite or non-finite step."""
    opt = _updating(opt)
    known = {id(slot) for _, slot in _slots.get(opt, ())}
    known.add(id(_counter(opt)))
    known.add(id(getattr(opt, "_learning_rate", None)))
    return [v for v in opt.variables if id(v) not in known]


def apply(opt, original, grads, variables, weight, reducing):
    """Keras' apply of `opt` (the unwrapped `original`), sharded. False where
    this optimizer's updates are not sharded (the caller then runs the full
    update); once an optimizer took a sharded step, every later step is
    sharded too, or refused: a full update would read the slots other ranks
    own, which are empty or stale here."""
    sharded = any(o is opt for o in _sharded)
    reason = _why_not(opt, grads, variables)
    if reason is None and not sharded:
        _build(opt, variables)
        if _unrecorded_slots(opt):
            reason = (f"{type(opt).__name__} keeps state that is not made per variable "
                      "(add_variable), so it has no owner")
    if reason is not None:
        if sharded:
            raise ValueError(
                f"tfmpi: this optimizer's updates are sharded (TFMPI_SHARDED_UPDATE=1), but this "
                f"update can't be: {reason}. Set TFMPI_SHARDED_UPDATE=0")
        _refill(_updating(opt))  # the slots its build emptied (_build)
        tell(reason)
        return False
    owner = _owner_of(opt)
    if not sharded:
        _sharded.append(opt)
        _empty_all(_others(opt))
    roots = [owner(v) for v in variables]
    reduced = collectives.reduce_to_owners(grads, weight, roots)
    mine = [(g, v) for g, v, r in zip(reduced, variables, roots)
            if r == state.rank and g is not None]
    clip = getattr(opt, "global_clipnorm", None)
    off = ()
    if clip:
        mine = _clipped_by_global_norm(opt, mine, clip, grads)
        off = ("global_clipnorm", "loss_scale_factor")  # done by _clipped_by_global_norm
    with reducing(), _attributes_off(opt, off):
        if _loss_scaled(opt):
            _loss_scaled_update(opt, mine)
        elif mine:
            original(opt, [g for g, _ in mine], [v for _, v in mine])
        else:
            _counter(opt).assign_add(1)
    updated = [(v, r) for g, v, r in zip(grads, variables, roots) if g is not None]
    collectives.broadcast_from_owners([v for v, _ in updated], [r for _, r in updated])
    return True


def _clipped_by_global_norm(opt, mine, clip_norm, grads):
    """The owned (gradient, variable) pairs as Keras' apply has them when its
    update runs: divided by loss_scale_factor, then scaled by global_clipnorm
    (clip_by_global_norm in keras/src/optimizers/base_optimizer.py), with the
    norm of every gradient: each rank's sum of squares over the gradients it
    owns, summed over ranks (one scalar allreduce, on every rank, also one
    that owns nothing). Variables that take their gradient as their value
    (overwrite_with_gradient) are left out, as Keras leaves them out. Only the
    order of the sum differs from the 1-process norm."""
    overwrite = getattr(opt, "_overwrite_variable_with_gradient", lambda v: False)
    factor = getattr(opt, "loss_scale_factor", None)
    dtype = next((g.dtype for g in grads if g is not None), tf.float32)  # alike on every rank
    out, clipped = [], []
    for g, v in mine:
        if overwrite(v):
            out.append((g, v))
            continue
        if factor is not None:
            g = g / factor
        out.append((g, v))
        clipped.append(len(out) - 1)
    squares = [tf.cast(tf.reduce_sum(tf.square(out[i][0])), dtype) for i in clipped]
    mine_sum = tf.reduce_sum(tf.stack(squares)) if squares else tf.zeros([], dtype)
    total, = collectives.allreduce_sum([mine_sum], "global_norm")
    norm = tf.sqrt(total)
    scale_for_finite = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)
    scale = scale_for_finite + (norm - norm)  # NaN for a norm that is not finite, as in Keras
    for i in clipped:
        g, v = out[i]
        out[i] = (g * tf.cast(scale, g.dtype), v)
    return out


def _loss_scaled_update(opt, mine):
    """A LossScaleOptimizer's apply on the owned (gradient, variable) pairs,
    with the finite check of every gradient: each rank checks those it owns,
    one scalar allreduce counts the ranks that found a non-finite one, and
    every rank takes the same step: the finite one (unscale, inner update of
    its own variables, the scale's growth counter) or the non-finite one
    (halve the scale), so the scale and counter agree everywhere."""
    if mine:
        finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g, _ in mine]))
    else:
        finite = tf.constant(True)
    bad, = collectives.allreduce_sum([tf.cast(tf.logical_not(finite), tf.int32)], "finite_check")
    grads, variables = [g for g, _ in mine], [v for _, v in mine]

    def finite_step():
        opt._stateful_handle_finite_grads(grads, variables)
        if not mine:  # the inner apply returns early without gradients: count the step here
            _counter(opt).assign_add(1)

    tf.cond(tf.equal(bad, 0), finite_step, opt._stateful_handle_non_finite_grads)


class _attributes_off:
    """`names` of the optimizer set to None while its apply runs, then restored."""

    def __init__(self, opt, names):
        self.opt, self.names = opt, names

    def __enter__(self):
        self.saved = [(n, getattr(self.opt, n)) for n in self.names]
        for n in self.names:
            setattr(self.opt, n, None)

    def __exit__(self, *exc):
        for n, value in self.saved:
            setattr(self.opt, n, value)


def record_slot(opt, variable, slot, initializer):
    """Records `slot` of `opt` for `variable`. While a sharded update builds
    the optimizer (_build), empties the slot where another rank owns the
    variable (Note [Owned state]); not elsewhere (the fused update's check
    builds optimizers of its own, a load builds one on rank 0 alone)."""
    _slots.setdefault(opt, []).append((variable, slot))
    slot._tfmpi_initializer = initializer
    if not getattr(opt, "_tfmpi_shard_at_build", False) or not _built_on(opt, variable):
        return
    if _owner_of(opt)(variable) != state.rank:
        _empty_all([slot])


def _built_on(opt, variable):
    """Whether `variable` is one of those `opt` is being built on, so it has an
    owner (Keras' build lists them all before it makes the slots)."""
    indices = getattr(opt, "_trainable_variables_indices", {})
    return (bool(indices) and len(opt._trainable_variables) == len(indices)
            and opt._var_key(variable) in indices)


def _refill(opt):
    """Gives the slots of `opt` (an updating optimizer, before its first
    update) that its build emptied their initial values, made by their
    initializers as Keras made them, in storage of their shape: its update
    runs in full. Eager."""
    from keras import initializers

    with tf.init_scope():
        for _, slot in _slots.get(opt, ()):
            if not getattr(slot, "_tfmpi_empty", False):
                continue
            slot._tfmpi_empty = False
            if int(tf.size(slot._value)) == int(np.prod(slot.shape, dtype=np.int64)):
                continue  # filled since (a load)
            initializer = initializers.get(getattr(slot, "_tfmpi_initializer", "zeros"))
            slot._initialize(initializer(tuple(slot.shape), dtype=slot.dtype))
            slot._tfmpi_loose = False


def _slot_owners(opt):
    """(slot, owner rank of its variable) for every slot of `opt`, in the order
    it made them (alike on every rank)."""
    owner = _owner_of(opt)
    return [(slot, owner(v)) for v, slot in _slots.get(_updating(opt), ())]


def _others(opt):
    """The slots of `opt` whose variables other ranks own."""
    return [slot for slot, r in _slot_owners(opt) if r != state.rank]


def _empty_all(slots):
    """Frees the storage of `slots` (Note [Owned state]); eager, also while a
    step is traced."""
    with tf.init_scope():
        for slot in slots:
            if not getattr(slot, "_tfmpi_loose", False):
                slot._value = tf.Variable(tf.zeros([0], slot._value.dtype),
                                          shape=tf.TensorShape(None), trainable=False,
                                          name=slot.name)
                slot._tfmpi_loose = True
            else:
                slot._value.assign(tf.zeros([0], slot._value.dtype))
            slot._tfmpi_empty = True


def slots_with_owners():
    """ids of the slots of every sharded optimizer (alike on every rank): each
    one's value comes from its variable's owner, not from rank 0."""
    return {id(slot) for opt in _sharded for _, slot in _slots.get(_updating(opt), ())}


def empty_others():
    """Empties, on every sharded optimizer, the slots other ranks own (as its
    first sharded update did); at the start of fit."""
    for opt in _sharded:
        _empty_all(_others(opt))


def sync_state():
    """Every slot of every sharded optimizer from its variable's owner (Note
    [Owned state]); emptied slots are filled first. Eager, on every rank at
    the same point. Returns the slots that were empty."""
    emptied = []
    for opt in _sharded:
        pairs = _slot_owners(opt)
        for slot, r in pairs:
            if r != state.rank and getattr(slot, "_tfmpi_empty", False):
                emptied.append(slot)  # storage of its shape again, for the broadcast
                slot._value.assign(tf.zeros(slot.shape, slot._value.dtype))
                slot._tfmpi_empty = False
        if pairs:
            collectives.broadcast_from_owners([s for s, _ in pairs], [r for _, r in pairs],
                                              role="owned_state")
    return emptied


# Note [State to the writer]
# Rank 0 needs the slots other ranks own to write them; the others need
# nothing. The engine has no gather to one rank, so each slot's bytes are
# summed onto rank 0 (one grouped reduce, the op that takes the step's
# gradients to their owners): its owner gives the slot's bytes as uint8 and
# every other rank zeros of that length. A sum of integers whose terms are all
# 0 but one is that one, bit for bit (a sum of the floats themselves would turn
# the owner's -0.0 into +0.0). The slots go in chunks of at most _CHUNK_BYTES
# (a larger slot alone), so the zeros a rank makes at a time are one chunk, not
# the state it does not own. A reduce moves more bytes than a gather would
# (every rank sends its chunk); a write is rare and slow anyway.
_CHUNK_BYTES = 64 << 20


def _as_bytes(tensor):
    """`tensor`'s bytes, flat uint8 (a view where TensorFlow can)."""
    if tensor.dtype == tf.bool:
        tensor = tf.cast(tensor, tf.uint8)
    elif tensor.dtype != tf.uint8:
        tensor = tf.bitcast(tensor, tf.uint8)
    return tf.reshape(tensor, [-1])


def _from_bytes(data, shape, dtype):
    """The inverse of _as_bytes for a tensor of `shape` and `dtype`."""
    dtype = tf.as_dtype(dtype)
    if dtype == tf.bool:
        return tf.cast(tf.reshape(data, shape), dtype)
    if dtype.size == 1:  # bitcast keeps the shape between types of one size
        return tf.bitcast(tf.reshape(data, shape), dtype)
    return tf.bitcast(tf.reshape(data, list(shape) + [dtype.size]), dtype)


def _chunks(pairs):
    """`pairs` (slot, owner) in order, cut into runs of at most _CHUNK_BYTES."""
    chunk, size = [], 0
    for slot, owner in pairs:
        n = _bytes(slot)
        if chunk and size + n > _CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append((slot, owner))
        size += n
    if chunk:
        yield chunk


def state_to_rank0():
    """Rank 0 gets every slot of every sharded optimizer that another rank
    owns, current (Note [State to the writer]); emptied ones are filled. Eager,
    on every rank at the same point. Returns the slots rank 0 filled (none
    elsewhere)."""
    pairs = [(slot, r) for opt in _sharded for slot, r in _slot_owners(opt) if r != 0]
    filled = []
    for chunk in _chunks(pairs):
        mine = [_as_bytes(tf.convert_to_tensor(slot._value)) if r == state.rank else
                tf.zeros([_bytes(slot)], tf.uint8) for slot, r in chunk]
        got = collectives.sum_onto(mine, 0, role="state_to_writer")
        if state.rank != 0:
            continue
        for (slot, _), data in zip(chunk, got):
            if getattr(slot, "_tfmpi_empty", False):
                filled.append(slot)
                slot._tfmpi_empty = False
            slot._value.assign(_from_bytes(data, slot.shape, slot.dtype))
    return filled


def _kept_empty():
    """The slots other ranks own that this rank keeps empty; a load or an
    assign may have filled them since."""
    return [slot for opt in _sharded for slot in _others(opt)
            if getattr(slot, "_tfmpi_empty", False)]


@contextlib.contextmanager
def state_on_rank0():
    """Rank 0 holds every slot, current, inside (the other ranks only their
    own); on the way out the slots rank 0 filled, and on every rank those a
    load filled, are emptied again (a write, Note [Owned state])."""
    filled = state_to_rank0()
    try:
        yield
    finally:
        _empty_all(filled + _kept_empty())


def install():
    """Records optimizer slots; empties other ranks' slots when fit starts and
    brings them from their owners when fit returns (Note [Owned state])."""
    import functools

    if not enabled():
        return

    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
    from keras.src.optimizers import base_optimizer

    cls = base_optimizer.BaseOptimizer
    if getattr(cls.add_variable_from_reference, "_tfmpi_wrapped", False):
        return
    original_add = cls.add_variable_from_reference

    @functools.wraps(original_add)
    def add_variable_from_reference(self, reference_variable, *args, **kwargs):
        slot = original_add(self, reference_variable, *args, **kwargs)
        initializer = kwargs.get("initializer", args[1] if len(args) > 1 else "zeros")
        record_slot(self, reference_variable, slot, initializer)
        return slot

    add_variable_from_reference._tfmpi_wrapped = True
    cls.add_variable_from_reference = add_variable_from_reference
    original_fit = TensorFlowTrainer.fit

    @functools.wraps(original_fit)
    def fit(self, *args, **kwargs):
        if enabled():
            empty_others()
        history = original_fit(self, *args, **kwargs)
        if enabled():
            sync_state()
        return history

    TensorFlowTrainer.fit = fit

