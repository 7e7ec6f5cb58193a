"""Work shares: each rank's slice of every global batch follows its speed.

Note [Live shares]
Under global-batch semantics the split does not change the math (Note [Global
batch], batching.py: the slice weights s_i / B make every update the
1-process update), only how long a step takes, about max_i s_i * t_i. So
slices follow the ranks' speeds (TFMPI_SHARES=adaptive; the default across
hosts, Note [Shares by default] in config.py):
- The cut points c_0 = 0 <= ... <= c_N = 1 live in a variable (float64); the
  compiled step cuts a batch of b at floor(b * c_i + 0.5), the formula of the
  C++ planner (src/tfmpi/planning/shares.h, Note [Work shares]). New shares
  are a new value of the variable: no retrace, no recompile.
- The first cuts come from the probes of `tfmpirun --placement aware`
  (TFMPI_PROBE_SPEEDS, one relative speed per rank), else equal.
- Each rank counts the samples it computes (a variable the step adds its
  slice size to) and its busy time: the wall time of the steps minus the time
  it spent inside collectives (Note [Time in collectives],
  src/tfmpi/runtime/collective_clock.h), where it waits for the others. The
  slowest rank waits least. Wall time, not a timer around the forward and
  backward pass: a host held to part of a core by a CPU quota computes a short
  step at full speed and is throttled later, in whatever it does next.
- Every `rebalance_steps` calls of the train function (a call that traces is
  never measured), the ranks allgather (busy seconds, samples) and feed them
  to the C++ Rebalancer (smoothing, hysteresis). A change needs two windows
  that agree (Note [Confirmed changes]), so some windows are short (4 calls):
  the first of a run, and the one after a window that proposed a change
  alone. Every rank runs it on the same gathered numbers, so every rank takes
  the same decision, and applies it before the same step. A window ends at
  its call even where calls in it were not measured (a pass's first step in a
  custom loop): it may then hold fewer measured steps, down to one.
- fit's train function rebalances after its calls; a custom loop that
  iterates a dataset eagerly (custom_loops.py) after each batch it takes
  (the time between two batches is one step; the first step of every pass
  is not measured: it may trace). Evaluation uses the current cuts. In
  per-rank batch mode, fit's training steps take the N batches the ranks
  would be dealt as one batch cut by the shares (Note [Batches by shares],
  per_rank.py); its custom loops keep equal batches.
Work that does not grow with the slice (Python, callbacks) is outside the
planner's per-sample model; a change it causes does not make the step faster
and is undone (Note [Changes on trial], src/tfmpi/planning/shares.h).
"""

import functools
import json
import os
import sys
import time

import tensorflow as tf

from tfmpi import _core
from tfmpi.tensorflow import ops as tops
from tfmpi.transparent import config, naming, state

_tracker = None


def enabled():
    """Adaptive shares: every batch split (global-batch mode), or in per-rank
    mode fit's dealt batches (Note [Batches by shares], per_rank.py)."""
    return state.size > 1 and state.options.shares == "adaptive"


def probe_speeds():
    """The relative speeds tfmpirun --placement aware measured (TFMPI_PROBE_SPEEDS),
    or None (start-up said so where the value is not one number per rank)."""
    return config.probed_speeds(state.size)[0]


@functools.lru_cache(maxsize=None)
def initial_fractions():
    """The first shares (read and checked once: the variable, the rebalancer and the log use them)."""
    speeds = probe_speeds()
    return tuple(_core.share_fractions(speeds if speeds else [1.0] * state.size))


def cuts_variable():
    return state.variable("share_cuts", lambda: tf.Variable(
        _core.share_cuts(list(initial_fractions())), trainable=False, dtype=tf.float64,
        name="tfmpi_share_cuts"))


def samples_variable():
    """The samples this rank computed since the last rebalance."""
    return state.variable("samples_done", lambda: tf.Variable(
        0.0, trainable=False, dtype=tf.float64, name="tfmpi_samples_done"))


def at_least_one_row(bounds, batch_size):
    """The N + 1 slice bounds `bounds` of a batch of `batch_size`, moved so that
    every slice has a row when the batch has N rows or more (Note [Work shares],
    src/tfmpi/planning/shares.h: each bound at least one past the one before,
    at most where the remaining ranks still get a row each). Unchanged where
    every slice already has a row, and for a batch smaller than N."""
    n = state.size
    i = tf.range(n + 1, dtype=bounds.dtype)
    pushed = i + tf.scan(tf.maximum, bounds - i)
    capped = tf.minimum(pushed, batch_size - (n - i))
    return tf.where(batch_size >= n, capped, bounds)


def bounds(batch_size):
    """The N + 1 bounds of every rank's slice of a batch of `batch_size`, from the cuts."""
    cuts = tf.convert_to_tensor(cuts_variable())
    b = tf.cast(batch_size, tf.float64)
    raw = tf.cast(tf.floor(b * cuts + 0.5), batch_size.dtype)
    return at_least_one_row(raw, tf.convert_to_tensor(batch_size))


def slice_bounds(batch_size):
    """(start, size) of this rank's slice of a batch of `batch_size`, from the cuts."""
    v = bounds(batch_size)
    return v[state.rank], v[state.rank + 1] - v[state.rank]


def record_samples(split):
    """Add this rank's slice size to samples_variable, where gradients are
    reduced: the split of the step being traced, else (a custom loop) the
    split its iterator recorded last."""
    if not enabled():
        return
    if split is None:
        if state.options.batch_mode != "global":
            return  # per-rank mode splits no custom loop (Note [Batches by shares])
        from tfmpi.transparent import batching

        split = batching.variable_split()
        if split is None:
            return
    samples_variable().assign_add(tf.cast(split.size, tf.float64))


class _Tracker:
    """Counts train-function calls and rebalances on the same calls on every rank."""

    def __init__(self):
        opts = state.options
        self.every = opts.rebalance_steps
        self.short = min(4, self.every) if self.every else 0  # a short window's calls
        self.next_at = self.short  # the call after which the ranks next rebalance
        self.calls = 0
        self.window_start = time.perf_counter()
        self.waited_before = _core.collective_seconds()
        self.rebalancer = _core.Rebalancer(list(initial_fractions()))
        self.history = []
        self.pass_first_step = False  # a custom loop's pass is at its first step
        # The first call after new shares is not measured either: a custom loop
        # cuts its slices before the script's function is called, so new slice
        # sizes are new input shapes, traced once.
        self.settling = False

    def after_call(self, traced):
        self.calls += 1
        if traced or self.settling:  # a call that traced says nothing about speed
            self.settling = False
            self.reset()
            return
        if self.every and self.calls >= self.next_at:
            self.rebalance()
            short = self.rebalancer.awaiting_confirmation
            self.next_at = self.calls + (self.short if short else self.every)

    def reset(self):
        samples_variable().assign(0.0)
        self.window_start = time.perf_counter()
        self.waited_before = _core.collective_seconds()

    def rebalance(self):
        samples = samples_variable().numpy()
        wall = time.perf_counter() - self.window_start
        busy = max(0.0, wall - (_core.collective_seconds() - self.waited_before))
        mine = tf.constant([[busy, samples]], dtype=tf.float64)
        gathered = tops.allgather(mine, name=naming.name("shares")).numpy()
        self.reset()
        batch = int(state.split.numpy()[2]) if state.split is not None else 0
        seconds = [float(x) for x in gathered[:, 0]]
        samples = [int(round(x)) for x in gathered[:, 1]]
        if batch <= 0:
            return
        changed = self.rebalancer.observe(seconds, samples, batch)
        if changed:
            cuts_variable().assign(_core.share_cuts(self.rebalancer.fractions))
            self.settling = True
        self.history.append({"call": self.calls, "wall": wall, "busy": seconds, "samples": samples,
                             "changed": bool(changed),
                             "awaiting": bool(self.rebalancer.awaiting_confirmation),
                             "fractions": list(self.rebalancer.fractions)})
        if changed and state.rank == 0 and state.options.shares_verbose:
            sizes = _core.slice_sizes(self.rebalancer.fractions, batch)
            print(f"tfmpi: step {self.calls}: new slice sizes {sizes} of {batch}", file=sys.stderr)


def custom_loop_step(first):
    """A custom loop takes its next batch: the step before it ended (`first`:
    the pass's first batch, after no step of this pass)."""
    if not enabled():
        return
    t = tracker()
    if first:
        t.reset()
    else:
        t.after_call(traced=t.pass_first_step)
    t.pass_first_step = first


def tracker():
    global _tracker
    if _tracker is None:
        _tracker = _Tracker()
        path = os.environ.get("TFMPI_SHARES_LOG")
        if path and state.rank == 0:
            import atexit
            atexit.register(_write_log, path)
    return _tracker


def _write_log(path):
    with open(path, "w") as f:
        json.dump({"size": state.size, "rebalance_steps": state.options.rebalance_steps,
                   "initial": list(initial_fractions()), "history": _tracker.history}, f)


def wrap_train_function(function):
    """fit's train function, followed by the rebalancing bookkeeping."""
    if not enabled() or function is None or getattr(function, "_tfmpi_shares", False):
        return function
    t = tracker()
    calls = [0]

    def train_function(*args, **kwargs):
        logs = function(*args, **kwargs)
        calls[0] += 1
        t.after_call(traced=calls[0] == 1)
        return logs

    train_function._tfmpi_shares = True
    return train_function
