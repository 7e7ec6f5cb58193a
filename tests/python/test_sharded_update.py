"""The sharded optimizer update (TFMPI_SHARDED_UPDATE=1, Note [Sharded
update], python/tfmpi/transparent/sharded_update.py): every variable has one
owner rank, only the owner runs the optimizer on it, and the owner's slots
are the only ones each rank holds while steps run (Note [Owned state]). The
fidelity kinds *_sharded_update (test_fidelity.py) compare whole runs with one
process; these tests show the sharding is real: each rank's slots match the
1-process run's for the variables it owns and hold no elements for the
others, before a save and after it, while the saved file holds the whole
1-process state; fit leaves the whole state on every rank."""

import json
import os
import sys

import numpy as np
import pytest

import grouped_runs
from mpirun_util import HERE, mpirun_command, run, run_into

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")


# Trains, saves and loads with the sharded update, its settings from the
# environment (scripts/sharded_steps.py).
STEPS = "scripts/sharded_steps.py"

# Every run of STEPS under TFMPI_SHARDED_UPDATE=1 that is compared with its
# 1-process run: name -> (ranks, the script's settings). They run in turn, one
# tfmpirun per rank count, and their 1-process runs in one process
# (scripts/run_in_turn.py): starting a process costs more than a run.
OWNED = [(2, False, "norm", False), (3, False, "norm", False), (2, True, "norm", False),
         (3, False, "global", False), (2, True, "global", False), (2, False, "global", "factor"),
         (3, False, "norm", True), (2, True, "norm", True)]
OWNS_NOTHING = [(False, {"CLIP": "global"}), (True, {"LOSS_SCALE": "1"})]


def _eager(eager):
    return {"EAGER": "1"} if eager else {}


RUNS = {
    **{f"owned-{n}-{e}-{c}-{s}": (n, {"CLIP": c, **_eager(e),
                                      **({"LOSS_SCALE_FACTOR": "1"} if s == "factor" else
                                         {"LOSS_SCALE": "1"} if s else {})})
       for n, e, c, s in OWNED},
    **{f"owns-nothing-{e}": (2, {"TINY": "1", **v, **_eager(e)}) for e, v in OWNS_NOTHING},
    "accumulate": (2, {"CLIP": "global", "ACCUMULATE": "1"}),
}


def _runs_of(item):
    """The runs of RUNS that test item `item` checks."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    name = getattr(item, "originalname", None)
    if name == "test_each_rank_updates_what_it_owns_and_saves_the_whole_state":
        return ["owned-{np_}-{eager}-{clip}-{loss_scale}".format(**params)]
    if name == "test_a_rank_that_owns_nothing_still_takes_part":
        return [f"owns-nothing-{params['eager']}"]
    if name == "test_gradient_accumulation_runs_the_full_update_and_says_why":
        return ["accumulate"]
    return []


@pytest.fixture(scope="module")
def steps(request, tmp_path_factory):
    """name -> (the 1-process run's rank-0.json, the folder of the ranks' files,
    the run's part of the output). Every run of the selected tests is made at
    the first request (grouped_runs.py)."""
    made = {}

    def get(name):
        if not made:
            runs = {}
            for n in grouped_runs.selected(request, _runs_of):
                np_, env = RUNS[n]
                runs[n] = grouped_runs.Run(("tfmpirun", "-np", str(np_)),
                                           {"TFMPI_SHARDED_UPDATE": "1"}, [STEPS], env)
                runs[n + "-one"] = grouped_runs.Run((), {}, [STEPS], env)
            made.update(grouped_runs.launch(runs, tmp_path_factory.mktemp("steps")))
        one, _ = grouped_runs.checked(made, name + "-one")
        many, stdout = grouped_runs.checked(made, name)
        return json.load(open(one / "rank-0.json")), many, stdout

    return get


def _close(a, b, what):
    assert len(a) == len(b), f"{what}: {len(a)} values, {len(b)} expected"
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("np_,eager,clip,loss_scale", OWNED)
def test_each_rank_updates_what_it_owns_and_saves_the_whole_state(np_, eager, clip, loss_scale,
                                                                  steps):
    # Eagerly too: the step's collectives run one by one, and the update must
    # still run once (iterations == 6). With global_clipnorm the owners scale
    # their gradients by the norm of all of them; with a LossScaleOptimizer
    # every rank skips the steps where any gradient overflowed (Note [Sharded
    # update]).
    ref, many, stdout = steps(f"owned-{np_}-{eager}-{clip}-{loss_scale}")
    assert "runs in full" not in stdout, stdout
    if clip == "global":  # the clip is at work: the first steps' norms are above 1.0
        assert ref["norms"][0] > 1.0, ref["norms"]
    if loss_scale is True:  # the scale grew three times
        assert ref["scale"] == 2.0 ** 18, ref["scale"]
    owners = None
    for rank in range(np_):
        got = json.load(open(many / f"rank-{rank}.json"))
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        _close(got["weights"], ref["weights"], f"rank {rank} weights")
        assert got["iterations"] == ref["iterations"] == 6
        assert got["scale"] == ref["scale"], f"rank {rank}: loss scale {got['scale']}"
        owners = owners or got["owners"]
        assert got["owners"] == owners and len(owners) == 6, got["owners"]
        assert set(owners) == set(range(np_)), f"every rank owns something: {owners}"
        _held_as_owned(got, ref, rank)
        _close(got["saved"], ref["saved"], f"rank {rank} saved optimizer state")
    _written_as_owned(many, np_)


def _written_as_owned(folder, np_):
    """What rank 0 holds for a write is each owner's slot, exactly."""
    ranks = [json.load(open(folder / f"rank-{rank}.json")) for rank in range(np_)]
    for k, value in enumerate(ranks[0]["during"]):
        owner = ranks[0]["owners"][k // 2]
        assert value == ranks[owner]["after"][k], f"slot {k} written from rank {owner}"


def _held_as_owned(got, ref, rank):
    """Adam's slots, a momentum and a velocity per variable in variable order:
    the 1-process values for the variables `rank` owns, no elements for the
    others (their shapes kept), before the save and after it; while a write
    would run, rank 0 holds every slot and the others still only their own."""
    owners = got["owners"]
    assert got["shapes"] == ref["shapes"], got["shapes"]
    assert len(got["during"]) == len(ref["after"]), got["during"]
    full = [int(np.size(r)) for r in ref["after"]]
    assert got["after_load"] == [n if owners[k // 2] == rank else 0 for k, n in enumerate(full)], (
        f"rank {rank} after a load and a write: {got['after_load']}, owners {owners}")
    for when in ("before", "after", "during"):
        for k, (b, r) in enumerate(zip(got[when], ref["after"])):
            variable = k // 2
            if owners[variable] == rank or (when == "during" and rank == 0):
                _close([b], [r], f"rank {rank}: slot {k} of its own variable {variable}, {when}")
            else:
                assert np.size(b) == 0, (f"rank {rank} holds slot {k} of rank "
                                         f"{owners[variable]}'s variable {when} the save")


def test_loss_scale_overflows_are_skipped_on_every_rank_alike(tmp_path):
    # A scale at the edge of float32: some steps overflow in some gradients,
    # and which ones depends on each rank's slice, as with the full update
    # (a slice's scaled gradient can overflow where the whole batch's would
    # not, so here both runs differ from one process). Every rank must skip
    # exactly the steps the full update skips: the finite check is of every
    # gradient, not of the ones a rank owns.
    args = ["tfmpirun", "-np", "3", sys.executable, os.path.join(HERE, STEPS)]
    env = {"LOSS_SCALE": "overflow"}
    run_into(args, tmp_path / "full", {**env, "TFMPI_SHARDED_UPDATE": "0"})
    r = run_into(args, tmp_path / "sharded", {**env, "TFMPI_SHARDED_UPDATE": "1"})
    assert "runs in full" not in r.stdout, r.stdout
    ref = json.load(open(tmp_path / "full" / "rank-0.json"))
    assert 0 < ref["iterations"] < 6, ref["iterations"]  # steps were skipped, not all
    for rank in range(3):
        got = json.load(open(tmp_path / "sharded" / f"rank-{rank}.json"))
        assert (got["iterations"], got["scale"]) == (ref["iterations"], ref["scale"]), rank
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        _close(got["weights"], ref["weights"], f"rank {rank} weights")
        _close(got["saved"], ref["saved"], f"rank {rank} saved optimizer state")


@pytest.mark.parametrize("eager", [e for e, _ in OWNS_NOTHING])
def test_a_rank_that_owns_nothing_still_takes_part(eager, steps):
    # One variable, two ranks: rank 1 owns nothing, yet it joins the global
    # norm's allreduce or the finite check and counts the step.
    ref, many, stdout = steps(f"owns-nothing-{eager}")
    assert "runs in full" not in stdout, stdout
    for rank in range(2):
        got = json.load(open(many / f"rank-{rank}.json"))
        assert got["owners"] == [0], got["owners"]
        assert (got["iterations"], got["scale"]) == (ref["iterations"], ref["scale"]) == (6, ref["scale"])
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        _close(got["weights"], ref["weights"], f"rank {rank} weights")
        _held_as_owned(got, ref, rank)
        _close(got["saved"], ref["saved"], f"rank {rank} saved optimizer state")


def test_gradient_accumulation_runs_the_full_update_and_says_why(steps):
    # gradient_accumulation_steps is not sharded: every rank updates every
    # variable (all slots current before any save), said once on rank 0.
    ref, many, stdout = steps("accumulate")
    assert stdout.count("gradient_accumulation_steps (the accumulated updates are not "
                        "sharded)") == 1, stdout
    for rank in range(2):
        got = json.load(open(many / f"rank-{rank}.json"))
        np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, err_msg=f"rank {rank}")
        _close(got["before"], ref["after"], f"rank {rank} slots before the save")
        assert got["owners"] == []


# What the fit scripts below share: this rank, and 256 samples of a linear target.
FIT_DATA = """
import json, os, sys
import numpy as np, keras
out = sys.argv[1]
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
keras.utils.set_random_seed(3)
rng = np.random.default_rng(1)
x = rng.normal(size=(256, 6)).astype("float32")
y = (x[:, :2] @ rng.normal(size=(2, 3))).astype("float32")
"""

# What the scripts below that fit a `model` end with: its weights and its
# optimizer's variables.
DUMP_WEIGHTS_AND_STATE = """
json.dump({"weights": [w.tolist() for w in model.get_weights()],
           "state": [np.asarray(v).tolist() for v in model.optimizer.variables]},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
"""


def _ends_as_one_process(script, tmp_path, env=None):
    """Runs `script` as one process and at -np 2 with the sharded update; each
    rank's weights and optimizer state must be the 1-process run's. Returns the
    2-rank run."""
    env = env or {}
    args = [sys.executable, "-c", script]
    run_into(args, tmp_path / "one", env)
    r = run_into(["tfmpirun", "-np", "2"] + args, tmp_path / "many", {**env, "TFMPI_SHARDED_UPDATE": "1"})
    ref = json.load(open(tmp_path / "one" / "rank-0.json"))
    for rank in range(2):
        got = json.load(open(tmp_path / "many" / f"rank-{rank}.json"))
        _close(got["weights"], ref["weights"], f"rank {rank} weights")
        _close(got["state"], ref["state"], f"rank {rank} optimizer state")
    return r


FIT_SCRIPT = FIT_DATA + """
import tensorflow as tf
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(24, activation="relu"),
                          keras.layers.Dense(12, activation="relu"), keras.layers.Dense(3)])
model.compile(keras.optimizers.Adam(0.01), "mse")
opt = model.optimizer
sizes = []  # elements each slot holds here, read during training
made, at_build = [], []  # slots as the optimizer makes them; elements all of them hold then
make = type(opt).add_variable_from_reference

def add_variable_from_reference(*args, **kwargs):
    made.append(make(opt, *args, **kwargs))
    with tf.init_scope():  # the first step, traced, builds the optimizer
        at_build.append(sum(int(np.size(v.numpy())) for v in made))
    return made[-1]
opt.add_variable_from_reference = add_variable_from_reference

def held():
    return [int(np.size(v)) for v in opt.variables[2:]]

class Sizes(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 2:
            sizes.append(held())

def slots():
    return [np.asarray(v).tolist() for v in opt.variables[2:]]
save = keras.callbacks.ModelCheckpoint(os.path.join(out, "epoch-{epoch}.keras"))
model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0, callbacks=[Sizes(), save])
after_first = slots()
model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0, callbacks=[Sizes()])
owners = []
if "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ:
    from tfmpi.transparent import sharded_update
    owners = list(sharded_update._owners.get(opt) or [])
saved = keras.saving.load_model(os.path.join(out, "epoch-1.keras")).optimizer
json.dump({"sizes": sizes, "full": [int(np.prod(v.shape)) for v in opt.variables[2:]],
           "at_build": at_build,
           "owners": owners, "after_first": after_first, "after_second": slots(),
           "weights": [w.tolist() for w in model.get_weights()],
           "saved": [np.asarray(v).tolist() for v in saved.variables[2:]]},
          open(os.path.join(out, f"rank-{rank}.json"), "w"))
"""


def test_fit_holds_only_owned_slots_while_training_and_leaves_the_whole_state(tmp_path):
    # Note [Owned state]: during each fit a rank holds the slots of the
    # variables it owns and no elements of the others', from the optimizer's
    # build on (each slot emptied as it is made: the whole state never exists
    # on a rank); the checkpoint written mid-fit and the state each fit leaves
    # are the 1-process run's.
    args = [sys.executable, "-c", FIT_SCRIPT]
    run_into(args, tmp_path / "one", {})
    r = run_into(["tfmpirun", "-np", "2"] + args, tmp_path / "many", {"TFMPI_SHARDED_UPDATE": "1"})
    assert "runs in full" not in r.stdout, r.stdout
    ref = json.load(open(tmp_path / "one" / "rank-0.json"))
    assert len(ref["sizes"]) == 3 and all(s == ref["full"] for s in ref["sizes"]), ref["sizes"]
    for rank in range(2):
        got = json.load(open(tmp_path / "many" / f"rank-{rank}.json"))
        owners = got["owners"]
        assert len(owners) == 6 and set(owners) == {0, 1}, owners
        held = [n if owners[k // 2] == rank else 0 for k, n in enumerate(ref["full"])]
        assert got["sizes"] == [held] * 3, f"rank {rank}: {got['sizes']}, owners {owners}"
        assert len(got["at_build"]) == len(held), got["at_build"]
        assert got["at_build"] == list(np.cumsum(held)), f"rank {rank}: {got['at_build']}, {held}"
        assert sum(held) < sum(ref["full"]), held
        for what in ("after_first", "after_second", "saved", "weights"):
            _close(got[what], ref[what], f"rank {rank} {what}")


ADAFACTOR_SCRIPT = FIT_DATA + """
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(3)])
model.compile(keras.optimizers.Adafactor(0.05), "mse")
model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
""" + DUMP_WEIGHTS_AND_STATE


def test_an_optimizer_with_state_not_made_per_variable_updates_in_full(tmp_path):
    # Adafactor's factored moments have no owner: the whole update runs on every
    # rank, said once, with every slot kept on every rank (Note [Owned state]).
    r = _ends_as_one_process(ADAFACTOR_SCRIPT, tmp_path)
    assert r.stdout.count("Adafactor keeps state that is not made per variable") == 1, r.stdout


LOOP_THEN_FIT_SCRIPT = FIT_DATA + """
import tensorflow as tf
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(24, activation="relu"),
                          keras.layers.Dense(3)])
model.compile(keras.optimizers.Adam(0.01), "mse")
opt, loss_fn = model.optimizer, keras.losses.MeanSquaredError()

@tf.function
def step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))

for xb, yb in tf.data.Dataset.from_tensor_slices((x[:96], y[:96])).batch(32):
    step(xb, yb)
model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)  # its train function is new
model.compile(model.optimizer, "mse")  # and new again
model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
""" + DUMP_WEIGHTS_AND_STATE


def test_fit_after_sharded_steps_leaves_the_owned_slots_to_their_owners(tmp_path):
    # A new train function broadcasts rank 0's model and optimizer state, but
    # not the slots of an optimizer whose updates are sharded: rank 0 holds
    # some of them empty, and their owners hold the current values.
    _ends_as_one_process(LOOP_THEN_FIT_SCRIPT, tmp_path)


REFILL_SCRIPT = FIT_DATA + """
import tensorflow as tf

class Scaled(keras.optimizers.Optimizer):
    # Adagrad-like accumulators that start at 0.7 (made per variable), and a
    # step count of its own (state with no owner: the update runs in full)
    def build(self, variables):
        super().build(variables)
        self.acc = [self.add_variable_from_reference(v, "acc", initializer=keras.initializers.Constant(0.7))
                    for v in variables]
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_step(self, gradient, variable, learning_rate):
        acc = self.acc[self._get_variable_index(variable)]
        acc.assign_add(gradient * gradient)
        variable.assign_sub(learning_rate * gradient / tf.sqrt(acc))
        self.count.assign_add(1.0)

if os.environ.get("SPARSE"):  # an embedding: sparse gradients, Keras' Adagrad
    x = rng.integers(0, 40, size=(256, 3))
    model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(40, 4),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    opt = keras.optimizers.Adagrad(0.1, initial_accumulator_value=0.7)
else:
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3)])
    opt = Scaled(0.05)
model.compile(opt, "mse")
model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
""" + DUMP_WEIGHTS_AND_STATE


@pytest.mark.parametrize("sparse", [False, True])
def test_slots_start_from_their_initializers_when_the_update_runs_in_full(sparse, tmp_path):
    # Dense: the first update builds the optimizer, emptying the slots other
    # ranks own; its own step count has no owner, so those slots get their
    # initial values back (0.7, not 0) and the whole update runs on every
    # rank. Sparse: the update is not sharded from the start, no slot is
    # emptied. Either way every rank ends as one process does.
    r = _ends_as_one_process(REFILL_SCRIPT, tmp_path, {"SPARSE": "1"} if sparse else {})
    why = "sparse gradients (IndexedSlices)" if sparse else "Scaled keeps state that is not made"
    assert r.stdout.count(why) == 1, r.stdout


IN_PLACE = r"""
import json, os, sys
import numpy as np, tensorflow as tf, tfmpi
from tfmpi.tensorflow import ops
tfmpi.init()
rank, size = tfmpi.rank(), tfmpi.size()
# small ones (fused), one above the engine's direct threshold, and other dtypes
specs = [((3, 4), "float32"), ((400000,), "float32"), ((5,), "float64"), ((2,), "int32"),
         ((0,), "float32")]
vs = [tf.Variable(np.full(shape, rank + 10 * i, dtype)) for i, (shape, dtype) in enumerate(specs)]
roots = [i % size for i in range(len(vs))]
before = vs[0].read_value()  # shares the variable's buffer: must keep its contents
ops.owners_broadcast_variables(vs, roots, names=[f"obv/{i}" for i in range(len(vs))])
eager = [sorted(set(np.ravel(v.numpy()).tolist())) for v in vs]

@tf.function
def step():
    for v in vs:
        v.assign_add(tf.ones_like(v))  # ordered before the broadcast by the resource inputs
    ops.owners_broadcast_variables(vs, roots, names=[f"obv2/{i}" for i in range(len(vs))])
    return [tf.reduce_max(v) if v.shape[0] else tf.constant(0, v.dtype) for v in vs]
traced = [float(x) for x in step()]
refused = []
for bad in ([vs[0], vs[0]], [vs[2], tf.Variable(["text"])]):
    try:
        ops.owners_broadcast_variables(bad, [0, 0], names=["bad/0", "bad/1"])
    except tf.errors.InvalidArgumentError as e:
        refused.append(e.message)
json.dump({"eager": eager, "traced": traced, "before": sorted(set(np.ravel(before).tolist())),
           "refused": refused, "after_refused": sorted(set(np.ravel(vs[2].numpy()).tolist()))},
          open(os.path.join(sys.argv[1], f"rank-{rank}.json"), "w"))
"""


@pytest.mark.parametrize("np_", [2, 3])
def test_owners_broadcast_writes_into_the_variables(np_, tmp_path):
    # The op the sharded update sends new values with: each variable gets its
    # owner's value in place, a value read before keeps its contents, inside a
    # tf.function it follows the update of the same variables, and the same
    # variable twice or a dtype the engine does not move is refused on every
    # rank (no hang) before any variable is written.
    r = run(mpirun_command(np_) + [sys.executable, "-c", IN_PLACE, str(tmp_path)], 120)
    assert r.returncode == 0, r.stdout
    for rank in range(np_):
        got = json.load(open(tmp_path / f"rank-{rank}.json"))
        roots = [i % np_ for i in range(5)]
        assert got["eager"] == [[roots[i] + 10 * i] for i in range(4)] + [[]], (rank, got)
        assert got["traced"] == [roots[i] + 10 * i + 1 for i in range(4)] + [0], (rank, got)
        assert got["before"] == [rank], (rank, got)
        assert len(got["refused"]) == 2, (rank, got)
        assert "bad/0 and bad/1 are the same variable" in got["refused"][0], (rank, got)
        assert "bad/1 is of string, a dtype tfmpi does not move" in got["refused"][1], (rank, got)
        assert got["after_refused"] == [roots[2] + 20 + 1], (rank, got)


def test_slot_bytes_survive_the_trip_to_the_writer_bit_for_bit():
    # Note [State to the writer]: a slot goes to rank 0 as its bytes and comes
    # back bit for bit, -0.0 included, for every dtype a slot can have.
    import tensorflow as tf

    from tfmpi.transparent.sharded_update import _as_bytes, _from_bytes

    def bits(t):
        return np.asarray(t if t.dtype.size == 1 else tf.bitcast(t, tf.uint8))

    for dtype in (tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int32, tf.int64,
                  tf.int8, tf.uint8, tf.bool):
        x = tf.cast(tf.constant([[-0.0, 1.5, -2.0], [3.0, 0.0, 7.0]]), dtype)
        data = _as_bytes(x)
        assert data.dtype == tf.uint8 and data.shape == [6 * dtype.size], dtype
        y = _from_bytes(data, x.shape, dtype)
        assert y.dtype == dtype and y.shape == x.shape, dtype
        assert np.array_equal(bits(y), bits(x)), dtype
