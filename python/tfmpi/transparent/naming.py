"""Collective names that every rank derives alike.

Note [Collective names]
The engine matches collectives across ranks by name, so a name must not depend
on anything that can differ between ranks: how often a rank traced a function
(ranks see slices of different shapes and retrace at different steps), which
objects it touched first (a callback that runs on rank 0 only), or Keras'
generated layer and variable names (they count every object created before).
A name is `tfmpi/<role>/<scope>`:
- in a graph being traced, scope is `g<k>`, k the number of collectives of that
  role already created in the outermost graph being traced: it depends only on
  the code traced, which is the same on every rank, and starts again at 0 in
  every new trace;
- eagerly, scope is `e`: an eager collective completes before the next one
  starts, so one fixed name per role is unambiguous.
Names repeat from step to step and across retraces; the engine only needs them
unique among the requests in flight. Tensors inside one collective are told
apart by their position (`.../<i>`), never by a variable's generated name.
"""

import threading
import weakref

import tensorflow as tf

_counts = weakref.WeakKeyDictionary()  # outermost graph being traced -> {role: count}
_lock = threading.Lock()


def _outermost_graph():
    graph = tf.compat.v1.get_default_graph()
    while getattr(graph, "building_function", False):
        outer = getattr(graph, "outer_graph", None)
        if outer is None or not getattr(outer, "building_function", False):
            break
        graph = outer
    return graph


def name(role):
    """The name of the next collective of `role` (see the Note above)."""
    if tf.executing_eagerly():
        return f"tfmpi/{role}/e"
    graph = _outermost_graph()
    with _lock:
        counts = _counts.setdefault(graph, {})
        k = counts.get(role, 0)
        counts[role] = k + 1
    return f"tfmpi/{role}/g{k}"


def names(role, count):
    """`count` names for the tensors of one grouped collective of `role`."""
    base = name(role)
    return [f"{base}/{i}" for i in range(count)]
