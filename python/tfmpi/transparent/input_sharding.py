"""Each rank reads and decodes only the samples of its slices.

Note [Sharded input]
Under global-batch semantics every rank takes rows [lo, lo + size) of each
global batch (batching.py). Without more, every rank runs the script's whole
input pipeline and throws N - 1 of N decoded samples away: an input-bound job
gets no faster. So a batched tf.data pipeline given to fit / evaluate /
predict, or iterated by a custom loop, is rewritten when it has this shape:

    order  ->  map f_1 -> ... -> map f_k  ->  batch(B)  ->  prefetch / options

`order` is whatever decides which samples form which batch (the source, a
seeded shuffle, repeat, filter, interleave, ...); it runs on every rank in
full, as before. It is batched to B first, so each rank sees the global
batch of *undecoded* elements (file names, indices, raw records), takes the
rows of its slice, and runs f_1 ... f_k (the per-element work: reads,
decoding, augmentation) on those rows only, batched to the slice. The slice
travels with its split [lo, size, B] and a fingerprint of the undecoded
global batch, so the step uses exactly these rows (the math is unchanged:
same samples, same slices) and the batch-agreement check (batch_check.py)
still compares what every rank read, and checks that the slices partition
the batch. Where `order` is a tfmpi.data reader (python/tfmpi/data), reading
is per-element work too: the order is the reader's row numbers, and each rank
reads only the rows of its slices (reader.from_indices), so the bytes each
rank reads are about 1/N of the data.

The split is computed by the pipeline from the work shares. Pipelines read
ahead, so the cuts they read are a copy (input_cuts) that changes only when
an iterator is made (an epoch starts, a custom loop starts a pass): every
rank makes it at the same point of the program, after the same rebalance
decisions, so every rank's pipeline cuts every batch alike. The shares are
still revised every TFMPI_REBALANCE_STEPS; a sharded pipeline follows them
from its next pass.

Not rewritten (every rank reads whole batches, as without this; rank 0 says
so once, with the reason): no map between the order and the batch (nothing
to save); a map whose function holds a stateful op (random ops, variable
updates, py_function: the 1-process run draws per element in stream order,
which a rank seeing a subset cannot reproduce); a map with
deterministic=False; anything after the batch other than prefetch and
options (e.g. a map over whole batches); ragged or sparse elements;
padded_batch and other batching ops; a batch size that is not a constant.
TFMPI_INPUT_SHARDING=off turns the rewrite off.
"""

import collections
import sys

import tensorflow as tf

from tfmpi.transparent import batch_check, batching, state

KEY_SPLIT = "tfmpi_slice_split"
KEY_DATA = "tfmpi_slice_data"

_MAPS = ("_MapDataset", "_ParallelMapDataset")
_AFTER_BATCH = ("_PrefetchDataset", "_OptionsDataset")
# Stateful ops that do not make an element's result depend on the stream order.
_HARMLESS_STATEFUL = {"ReadFile", "MatchingFiles", "Assert", "PrintV2", "Print",
                      "AnonymousIteratorV2", "AnonymousIteratorV3", "NoOp"}

Map = collections.namedtuple("Map", "function output_spec parallel_calls")
Plan = collections.namedtuple("Plan", "order maps batch_size drop_remainder after reader last_spec")

_said = set()


def enabled():
    return state.size > 1 and state.options.input_sharding


def _notice(reason):
    if state.rank == 0 and reason not in _said:
        _said.add(reason)
        print(f"tfmpi: this input pipeline is not sharded (every rank reads and decodes whole "
              f"batches and keeps its slice): {reason}. See docs/transparent.md, Sharded input.",
              file=sys.stderr)


def _stateful_ops(function):
    """Names of the stateful ops `function` (a ConcreteFunction) and the
    functions it calls hold, other than the harmless ones."""
    from tensorflow.python.framework import op_def_registry

    graph_def = function.graph.as_graph_def()
    nodes = list(graph_def.node)
    for f in graph_def.library.function:
        nodes.extend(f.node_def)
    found = set()
    for node in nodes:
        op_def = op_def_registry.get(node.op)
        if op_def is not None and op_def.is_stateful and node.op not in _HARMLESS_STATEFUL:
            found.add(node.op)
    return sorted(found)


def _dense(spec):
    return all(isinstance(s, tf.TensorSpec) for s in tf.nest.flatten(spec))


def analyse(dataset):
    """(Plan, None) when `dataset` can be rewritten, else (None, reason);
    (None, None) when there is nothing to gain and nothing to say."""
    after, d = [], dataset
    while type(d).__name__ in _AFTER_BATCH:
        after.append(d)
        d = d._input_dataset
    kind = type(d).__name__
    if kind != "_BatchDataset":
        if kind in _MAPS:
            return None, "a map is applied to whole batches (after batch)"
        return None, None
    batch_size = tf.get_static_value(d._batch_size)
    drop = tf.get_static_value(d._drop_remainder)
    if batch_size is None or drop is None:
        return None, "the batch size is not a constant"
    maps, e = [], d._input_dataset
    while type(e).__name__ in _MAPS or type(e).__name__ == "_PrefetchDataset":
        if type(e).__name__ != "_PrefetchDataset":
            if getattr(e, "_deterministic", "default") == "false":
                return None, "a map has deterministic=False"
            function = e._map_func.function
            stateful = _stateful_ops(function)
            if stateful:
                return None, (f"a map's function holds stateful ops ({', '.join(stateful)}): "
                              "per-element random draws or side effects follow the order of "
                              "the whole stream")
            calls = tf.get_static_value(getattr(e, "_num_parallel_calls", None)) \
                if type(e).__name__ == "_ParallelMapDataset" else None
            maps.append(Map(function, e.element_spec, calls))
        e = e._input_dataset
    reader = getattr(e, "_tfmpi_rows", None)  # a tfmpi.data reader: reading is per-element work
    if not maps and reader is None:
        return None, None
    if not _dense(e.element_spec) or not all(_dense(m.output_spec) for m in maps):
        return None, "its elements are ragged or sparse"
    if e.options().deterministic is False:
        return None, "its options set deterministic = False"
    maps.reverse()
    last_spec = maps[-1].output_spec if maps else e.element_spec
    order = e if reader is None else reader.index_dataset
    return Plan(order, maps, int(batch_size), bool(drop), list(reversed(after)), reader,
                last_spec), None


def input_cuts_variable():
    """The cuts sharded pipelines read (Note [Sharded input]): a copy of the
    work shares' cuts, refreshed when an iterator is made."""
    from tfmpi.transparent import shares

    return state.variable("input_cuts", lambda: tf.Variable(
        shares.cuts_variable().numpy(), trainable=False, dtype=tf.float64,
        name="tfmpi_input_cuts"))


def refresh_cuts():
    from tfmpi.transparent import shares

    if shares.enabled():
        input_cuts_variable().assign(shares.cuts_variable())


def _bounds(batch):
    from tfmpi.transparent import shares

    if not shares.enabled():
        return batching.slice_bounds(batch)
    cuts = tf.convert_to_tensor(input_cuts_variable())
    b = tf.cast(batch, tf.float64)
    lo = tf.cast(tf.floor(b * cuts[state.rank] + 0.5), tf.int64)
    hi = tf.cast(tf.floor(b * cuts[state.rank + 1] + 0.5), tf.int64)
    return lo, hi - lo


def _apply(m, flat):
    out = m.function(*flat)
    return tuple(tf.nest.flatten(out))


def _decoded(plan, rows, size, wrap=lambda data: data):
    """The per-element maps run on `rows` (flat, batched), batched back, cut
    to `size` rows, packed and passed through `wrap`."""
    if plan.reader is None:
        inner = tf.data.Dataset.from_tensor_slices(tuple(rows))
    else:  # rows are row numbers: this rank reads only those
        inner = plan.reader.from_indices(tf.data.Dataset.from_tensor_slices(rows[0]))
        inner = inner.map(lambda *element: tuple(tf.nest.flatten(element)))
    for m in plan.maps:
        inner = inner.map(lambda *flat, m=m: _apply(m, flat),
                          num_parallel_calls=m.parallel_calls, deterministic=True)
    last_spec = plan.last_spec
    return inner.batch(plan.batch_size + 1).map(
        lambda *flat: wrap(tf.nest.pack_sequence_as(last_spec, [t[:size] for t in flat])))


def _finish(plan, out, order):
    cardinality = int(order.cardinality())
    if cardinality >= 0 or cardinality == tf.data.INFINITE_CARDINALITY:
        out = out.apply(tf.data.experimental.assert_cardinality(cardinality))
    for op in plan.after:
        if type(op).__name__ == "_PrefetchDataset":
            size = tf.get_static_value(op._buffer_size)
            out = out.prefetch(tf.data.AUTOTUNE if size is None else int(size))
        else:
            out = out.with_options(op._options_attr)
    return out


def rewrite(plan):
    """The rewritten dataset: elements {KEY_SPLIT: [lo, size, B, fingerprint],
    KEY_DATA: this rank's rows of the global batch, decoded}."""
    from tfmpi.transparent import shares

    if shares.enabled():
        input_cuts_variable()  # made outside the pipeline's functions
    check = batch_check.enabled()

    def cut(*element):
        flat = tf.nest.flatten(element)
        batch = tf.shape(flat[0], out_type=tf.int64)[0]
        lo, size = _bounds(batch)
        # An empty slice still decodes one row (the batch's last), cut off
        # after decoding, so the slice has its structure and shapes.
        keep = tf.maximum(size, 1)
        start = tf.minimum(lo, batch - keep)
        rows = tuple(t[start:start + keep] for t in flat)
        fp = batch_check.fingerprint(flat)[0] if check else tf.constant(0, tf.int64)
        return rows, tf.stack([lo, size, batch, fp])

    def decode(rows, split):
        return _decoded(plan, rows, split[1], lambda data: {KEY_SPLIT: split, KEY_DATA: data})

    order = plan.order.batch(plan.batch_size, drop_remainder=plan.drop_remainder)
    return _finish(plan, order.map(cut).flat_map(decode), order)


def rewrite_dealt(plan, batches):
    """Per-rank batch mode: this rank's batches (per_rank.deal) of undecoded
    elements, decoded; and how many batches that is per rank."""
    from tfmpi.transparent import per_rank

    order, count = per_rank.deal(
        plan.order.batch(plan.batch_size, drop_remainder=plan.drop_remainder), batches)

    def decode(*element):
        flat = tf.nest.flatten(element)
        return _decoded(plan, flat, tf.shape(flat[0], out_type=tf.int64)[0])

    return _finish(plan, order.flat_map(decode), order), count


def plan_for(dataset):
    """The Plan for `dataset`, or None (the reason said once, where there is one)."""
    if not enabled() or not isinstance(dataset, tf.data.Dataset):
        return None
    try:
        plan, reason = analyse(dataset)
    except AttributeError as e:  # a tf.data release whose internals differ
        plan, reason = None, f"its structure could not be read ({e})"
    if plan is None and reason:
        _notice(reason)
    return plan


def plan_for_adapter(adapter):
    """plan_for the dataset of a Keras data adapter, where the script gave a
    tf.data pipeline (arrays and generators have no per-element work to share)."""
    if type(adapter).__name__ != "TFDatasetAdapter":
        return None
    return plan_for(adapter.get_tf_dataset())


def shard(dataset):
    """`dataset` rewritten for this rank (Note [Sharded input]), or None."""
    plan = plan_for(dataset)
    return None if plan is None else rewrite(plan)


def unwrap(data):
    """(slice, Split, fingerprint) for an element of a rewritten dataset, else None."""
    if not (isinstance(data, dict) and KEY_SPLIT in data):
        return None
    split = data[KEY_SPLIT]
    lo, size, total = split[0], split[1], split[2]
    weight = tf.math.divide_no_nan(tf.cast(size, tf.float32), tf.cast(total, tf.float32))
    return data[KEY_DATA], batching.Split(lo, size, total, weight), split


class Pass:
    """A rewritten dataset as Keras' epoch iterator holds it: each iterator it
    makes first refreshes the cuts the pipeline reads."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __iter__(self):
        refresh_cuts()
        return iter(self.dataset)

    def __getattr__(self, name):
        return getattr(self.dataset, name)


def install():
    """Keras 3's epoch iterators hand the rewritten dataset to the steps."""
    if state.size == 1 or not state.options.input_sharding:
        return
    from keras.src.backend.tensorflow.trainer import TFEpochIterator

    from tfmpi.transparent import loops, versions

    original_init = TFEpochIterator.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not loops.inside_keras_loop() or getattr(self, "_tfmpi_dealt", False):
            return
        versions.require_instance(self, ("data_adapter", "_distributed_dataset"),
                                  "TFEpochIterator")
        plan = plan_for_adapter(self.data_adapter)
        if plan is not None:
            self._distributed_dataset = Pass(rewrite(plan))

    TFEpochIterator.__init__ = __init__
