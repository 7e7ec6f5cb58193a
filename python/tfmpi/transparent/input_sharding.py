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
reads only the rows of its slices (one reader.read per slice), so the bytes each
rank reads are about 1/N of the data.

The batches of undecoded elements are cut to the rank's rows, unbatched, run
through f_1 ... f_k as ordinary element-wise maps (the script's parallelism,
in order) and batched again by the size of the rank's slice of a full batch:
the pipeline streams, with no dataset made per batch. Only the last batch of
a dataset is short, and it is cut in proportion (rows [b * L_r // B,
b * L_{r+1} // B) where L_r is where rank r's slice of a full batch starts,
moved so that every slice keeps a row when b >= N: shares.at_least_one_row),
so none of its slices is longer than the rank's full slice and batching the
stream gives back exactly one slice per batch. Any contiguous partition in
rank order gives the 1-process math (weights s_i / b); every rank computes
the same one. An empty cut (a batch smaller than N) still decodes one row,
dropped after decoding, so it has its structure and shapes; the step then
gathers the ranks' rows and every rank computes the whole batch (Note
[Batches smaller than the ranks], batching.py).

The cuts L are the work shares in force when the pipeline's iterator is made
(an epoch starts, a custom loop starts a pass): the pipeline is rewritten
then, with L as constants. Pipelines read ahead, so the shares they cut
with change only between passes, at the same point of the program on every
rank, after the same rebalance decisions. The shares are still revised
every TFMPI_REBALANCE_STEPS; a sharded pipeline follows them from its next
pass.

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

from tfmpi.transparent import batch_check, batching, file_sharding, loops, naming, shares, state

KEY_SPLIT = "tfmpi_slice_split"
KEY_DATA = "tfmpi_slice_data"

_MAPS = ("_MapDataset", "_ParallelMapDataset")
_AFTER_BATCH = ("_PrefetchDataset", "_OptionsDataset")
# Stateful ops that do not make an element's result depend on the stream order.
_HARMLESS_STATEFUL = {"ReadFile", "MatchingFiles", "Assert", "PrintV2", "Print",
                      "AnonymousIteratorV2", "AnonymousIteratorV3", "NoOp"}

Map = collections.namedtuple("Map", "function input_spec output_spec parallel_calls")
Plan = collections.namedtuple("Plan", "order maps batch_size drop_remainder after reader last_spec")

_said = set()
_made = collections.OrderedDict()  # _remembered's results
_REMEMBER = 32


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


Batched = collections.namedtuple("Batched", "top after batch_size drop_remainder")


def find_batch(dataset):
    """What stands under the prefetch / options at the end of `dataset` (top),
    those in order (after), and, where top is a batch of constant size, B and
    drop_remainder (else None)."""
    after, d = [], dataset
    while type(d).__name__ in _AFTER_BATCH:
        after.append(d)
        d = d._input_dataset
    size = drop = None
    if type(d).__name__ == "_BatchDataset":
        size, drop = tf.get_static_value(d._batch_size), tf.get_static_value(d._drop_remainder)
    if size is None or drop is None:
        return Batched(d, list(reversed(after)), None, None)
    return Batched(d, list(reversed(after)), int(size), bool(drop))


def analyse(dataset):
    """(Plan, None) when `dataset` can be rewritten, else (None, reason);
    (None, None) when there is nothing to gain and nothing to say."""
    found = find_batch(dataset)
    d = found.top
    kind = type(d).__name__
    if kind != "_BatchDataset":
        if kind in _MAPS:
            return None, "a map is applied to whole batches (after batch)"
        return None, None
    if found.batch_size is None:
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
            maps.append(Map(e._map_func._func, e._input_dataset.element_spec, e.element_spec, calls))
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
    return Plan(order, maps, found.batch_size, found.drop_remainder, found.after, reader,
                last_spec), None


def _full_bounds(batch_size):
    """The N + 1 bounds of the ranks' slices of a full batch, as the step would
    cut it now (batching.all_slice_bounds: the work shares, or B // N each)."""
    return tuple(int(v) for v in batching.all_slice_bounds(tf.constant(batch_size, tf.int64)))


def _apply(m, flat):
    """The script's map function on an element given flat, called as tf.data
    calls it (a tuple is unpacked into arguments); its outputs flat."""
    element = tf.nest.pack_sequence_as(m.input_spec, list(flat))
    out = m.function(*element) if type(element) is tuple else m.function(element)
    return tuple(tf.nest.flatten(out))


def _stream(plan, select, rows):
    """The batched order, each batch cut by `select` (batch size -> (first
    row, rows used, extra int64 values for the step)) to at most `rows` rows
    (an empty cut keeps one row, dropped after decoding); the per-element
    maps run on those elements (read first where the order is a reader's row
    numbers); batched back and cut to the rows used. Only a dataset's last
    batch is short, so batching the stream by `rows` gives back exactly one
    cut per batch. Elements: (data, int64 [2 + extras]: first row, rows used,
    extras...)."""
    def cut(*element):
        flat = tf.nest.flatten(element)
        batch = tf.shape(flat[0], out_type=tf.int64)[0]
        lo, size, extra = select(flat, batch)
        keep = tf.maximum(size, 1)
        planned = tf.debugging.assert_less_equal(keep, tf.constant(rows, tf.int64),
                                                 message="tfmpi: a slice is larger than planned")
        with tf.control_dependencies([planned]):
            index = tf.minimum(lo + tf.range(keep), batch - 1)
        picked = [tf.gather(t, index) for t in flat]
        if plan.reader is not None:  # row numbers: read just these rows, in one call
            picked = list(tf.nest.flatten(plan.reader.read(picked[0])))
        info = tf.stack([lo, size, *extra])
        return (*picked, tf.tile(info[None], [keep, 1]))

    stream = plan.order.batch(plan.batch_size, drop_remainder=plan.drop_remainder)
    cardinality = int(stream.cardinality())
    stream = stream.map(cut).unbatch()
    for m in plan.maps:
        parallel = {} if m.parallel_calls is None else {
            "num_parallel_calls": m.parallel_calls, "deterministic": True}
        stream = stream.map(lambda *e, m=m: (*_apply(m, e[:-1]), e[-1]), **parallel)
    stream = stream.batch(rows)
    if cardinality >= 0 or cardinality == tf.data.INFINITE_CARDINALITY:
        stream = stream.apply(tf.data.experimental.assert_cardinality(cardinality))

    def pack(*flat):
        info = flat[-1][0]
        return tf.nest.pack_sequence_as(plan.last_spec, [t[:info[1]] for t in flat[:-1]]), info

    return stream.map(pack)


def reapply_after(plan, out):
    """`out` with the prefetch / options the script applied after its batch."""
    for op in plan.after:
        if type(op).__name__ == "_PrefetchDataset":
            size = tf.get_static_value(op._buffer_size)
            out = out.prefetch(tf.data.AUTOTUNE if size is None else int(size))
        else:
            out = out.with_options(op._options_attr)
    return out


def _remembered(key, keep, make):
    """make(), or what it made for `key` before (the last _REMEMBER results are
    kept, with `keep`, the objects whose ids the key holds, kept alive)."""
    if key in _made:
        _made.move_to_end(key)
        return _made[key][1]
    result = make()
    _made[key] = (keep, result)
    while len(_made) > _REMEMBER:
        _made.popitem(last=False)
    return result


def rewrite(plan):
    """The rewritten dataset, cut with the work shares in force now: elements
    {KEY_SPLIT: [lo, size, B, fingerprint, 1 if some rank's cut is empty],
    KEY_DATA: this rank's rows of the global batch, decoded}. Made once per pipeline and cuts: tracing its
    functions again every pass would cost more than it saves. A plan of
    file_sharding.py gives the rank's files (Note [File sharding])."""
    full = _full_bounds(plan.batch_size)
    if isinstance(plan, file_sharding.Plan):
        return _remembered(("files-cut", id(plan), full), plan, lambda: file_sharding.rewrite(plan))
    return _remembered(("sliced", id(plan.order), full), plan, lambda: _rewrite(plan, full))


def _rewrite(plan, full):
    check = batch_check.enabled()
    r = state.rank

    def select(flat, batch):
        # A full batch is cut as the step would; the last, short one in proportion
        # (every slice keeps a row where the batch has N: shares.at_least_one_row),
        # so no slice of it is longer than the rank's slice of a full batch.
        cut = shares.at_least_one_row(batch * tf.constant(full, tf.int64) // plan.batch_size, batch)
        fp = batch_check.fingerprint(flat)[0] if check else tf.constant(0, tf.int64)
        some_empty = tf.cast(batch < state.size, tf.int64)  # Note [Batches smaller than the ranks]
        return cut[r], cut[r + 1] - cut[r], (batch, fp, some_empty)

    stream = _stream(plan, select, max(1, full[r + 1] - full[r]))
    return reapply_after(plan, stream.map(lambda data, info: {KEY_SPLIT: info, KEY_DATA: data}))


def rewrite_dealt(plan, batches):
    """Per-rank batch mode: this rank's batches (per_rank.deal) of undecoded
    elements, decoded; and how many batches that is per rank."""
    from tfmpi.transparent import per_rank

    order = plan.order.batch(plan.batch_size, drop_remainder=plan.drop_remainder)
    dealt, count = per_rank.deal(order, batches)
    whole = plan._replace(order=dealt.unbatch())  # the dealt batches, element by element

    def select(flat, batch):
        return tf.constant(0, tf.int64), batch, ()

    stream = _stream(whole, select, plan.batch_size)
    return reapply_after(plan, stream.map(lambda data, info: data)), count


def rewrite_grouped(plan, batches):
    """Per-rank batch mode dealing by shares (Note [Batches by shares],
    per_rank.py): the script's batches N at a time as one batch, each rank
    decoding only the rows of its slice; as an input_sharding.Pass (cut with
    the shares of each pass), and how many steps that is. Like per_rank.group,
    the last batches % N of an epoch are dropped."""
    from tfmpi.transparent import per_rank

    n, size = state.size, plan.batch_size
    order, steps = plan.order, None
    if batches is not None:
        steps = per_rank.steps_per_epoch(batches)
        order = order.take(steps * n * size)  # a tf.data pipeline holds one epoch
    return Pass(plan._replace(order=order, batch_size=n * size)), steps


def plan_for(dataset):
    """The Plan for `dataset`, or None (the reason said once, where there is one).
    With --data-sharding files, a file_sharding.Plan where the pipeline reads
    files, except for predict (its outputs keep the data's order)."""
    if not isinstance(dataset, tf.data.Dataset):
        return None
    if file_sharding.enabled() and loops.innermost() != "predict":
        plan = _remembered(("files", id(dataset)), dataset,
                           lambda: file_sharding.plan_for(dataset))
        if plan is not None:
            return plan
    if not enabled():
        return None
    return _remembered(("plan", id(dataset)), dataset, lambda: _plan(dataset))


def _plan(dataset):
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


def unwrap(data):
    """(slice, Split, [lo, size, B, fingerprint] as the pipeline cut it) for an
    element of a rewritten dataset, else None. Where some rank's cut holds no
    rows (a batch smaller than N; a rank whose files ran out), the ranks
    gather their rows first, and every rank cuts the global batch as
    batching.slice_batch does (Note [Batches smaller than the ranks])."""
    if not (isinstance(data, dict) and KEY_SPLIT in data):
        return None
    info, local = data[KEY_SPLIT], data[KEY_DATA]
    lo, size, total = info[0], info[1], info[2]
    weight = tf.math.divide_no_nan(tf.cast(size, tf.float32), tf.cast(total, tf.float32))
    cut = batching.Split(lo, size, total, weight)
    some_empty = tf.greater(info[4], 0)
    name = naming.name("short_batch")
    if tf.executing_eagerly():
        if bool(some_empty):
            local, cut = batching.slice_batch(batching.gather_rows(local, name))
        return local, cut, info[:4]

    def gathered():
        whole, split = batching.slice_batch(batching.gather_rows(local, name))
        return whole, (split.start, split.size, split.total, split.weight, split.replicated)

    def as_cut():
        return local, (lo, size, total, weight, tf.constant(False))

    local, fields = tf.cond(some_empty, gathered, as_cut)
    return local, batching.Split(*fields[:4], None, fields[4]), info[:4]


class Pass:
    """A rewritten pipeline as Keras' epoch iterator holds it: every iterator
    it makes is of a pipeline rewritten then, with the work shares in force
    (Note [Sharded input])."""

    def __init__(self, plan):
        self.plan = plan
        self.dataset = rewrite(plan)

    def __iter__(self):
        return iter(rewrite(self.plan))

    def __getattr__(self, name):
        return getattr(self.dataset, name)


def install():
    """Keras 3's epoch iterators hand the rewritten dataset to the steps; an
    epoch over a file-sharded one runs until its data ends where
    file_sharding.runs_until_exhausted says so (Keras 3 forgets the step
    count it inferred, at every epoch)."""
    if state.size == 1 or not (state.options.input_sharding or file_sharding.enabled()):
        return
    from keras.src.backend.tensorflow.trainer import TFEpochIterator

    from tfmpi.transparent import loops, versions

    original_init = TFEpochIterator.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not loops.inside_keras_loop() or getattr(self, "_tfmpi_dealt", False):
            return
        versions.require_instance(self, ("data_adapter", "_distributed_dataset", "_num_batches"),
                                  "TFEpochIterator")
        plan = plan_for_adapter(self.data_adapter)
        if plan is not None:
            self._distributed_dataset = Pass(plan)
            self._tfmpi_until_exhausted = file_sharding.runs_until_exhausted(
                plan, self.steps_per_epoch)

    original_iter = TFEpochIterator.__iter__

    def __iter__(self):
        if getattr(self, "_tfmpi_until_exhausted", False):
            self._num_batches = None
        return original_iter(self)

    TFEpochIterator.__init__ = __init__
    TFEpochIterator.__iter__ = __iter__
