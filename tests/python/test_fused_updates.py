"""The fused optimizer updates (TFMPI_FUSED_UPDATES, Note [Fused updates],
python/tfmpi/transparent/fused_updates.py): Keras' Adam and SGD update_step
with their element-wise part in one kernel. They must give Keras' results bit for bit,
which the fidelity tier only checks to 1e-5, so these tests compare bits:
whole model.fit runs with and without the patch, on two threads so that the
kernel splits its work, and the places where the stock update must run."""

import json
import sys

import pytest

from mpirun_util import run

pytest.importorskip("tensorflow", reason="the fused update is a TensorFlow kernel")

ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "1"}

SCRIPT = r"""
import json, sys
import numpy as np, tensorflow as tf, keras
from tfmpi.transparent import fused_updates

tf.config.experimental.enable_op_determinism()
calls = []
kernels = fused_updates._ops
fused_updates._ops = lambda: (calls.append(1), kernels())[1]

def train(make_opt, dtype="float32"):
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 300)).astype(dtype)
    y = (x[:, :4] @ rng.standard_normal((4, 5))).astype(dtype)
    model = keras.Sequential([keras.Input((300,), dtype=dtype),
                              keras.layers.Dense(512, activation="relu", dtype=dtype),
                              keras.layers.Dense(5, dtype=dtype)])
    opt = make_opt()
    model.compile(opt, "mse")
    hist = model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
    state = [np.asarray(v) for v in model.weights] + [np.asarray(v) for v in opt.variables]
    return hist.history["loss"], [s.tobytes().hex() for s in state]

def train_xla(make_opt, dtype=None):
    # fit turns XLA off under op determinism, so a custom step asks for it
    rng = np.random.default_rng(1)
    var = keras.Variable(rng.standard_normal(1000).astype("float32"))
    opt = make_opt()
    opt.build([var])
    step = tf.function(lambda g: opt.apply([g], [var]), jit_compile=True)
    for _ in range(3):
        step(tf.constant(rng.standard_normal(1000).astype("float32")))
    return [np.asarray(v).tobytes().hex() for v in [var] + list(opt.variables)]

cases = {
    "adam": lambda: keras.optimizers.Adam(1e-3),
    "adamw_clipnorm": lambda: keras.optimizers.AdamW(1e-2, weight_decay=0.05, clipnorm=0.5),
    "adam_schedule": lambda: keras.optimizers.Adam(
        keras.optimizers.schedules.ExponentialDecay(1e-2, 3, 0.7), beta_1=0.8, beta_2=0.95,
        epsilon=1e-4),
    "amsgrad": lambda: keras.optimizers.Adam(1e-3, amsgrad=True),
    "loss_scale": lambda: keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3)),
    "sgd_momentum": lambda: keras.optimizers.SGD(0.02, momentum=0.9, clipvalue=0.3),
    "sgd_nesterov": lambda: keras.optimizers.SGD(
        keras.optimizers.schedules.CosineDecay(0.05, 20), momentum=0.8, nesterov=True),
    "sgd_plain": lambda: keras.optimizers.SGD(0.02),
}
runs = {name: (train, make, "float32") for name, make in cases.items()}
runs["float64"] = (train, cases["adam"], "float64")
runs["sgd_float64"] = (train, cases["sgd_nesterov"], "float64")
runs["xla"] = (train_xla, cases["adam"], None)
stock = {name: fn(make, dtype) for name, (fn, make, dtype) in runs.items()}

fused_updates.install()
out = {"equal": {}, "calls": {}}
for name, (fn, make, dtype) in runs.items():
    calls.clear()
    out["equal"][name] = fn(make, dtype) == stock[name]
    out["calls"][name] = len(calls)
out["agrees"] = {" ".join(map(str, k)): ok for k, ok in fused_updates._agrees.items()}
json.dump(out, sys.stdout)
"""


def test_fit_with_the_fused_update_is_bit_for_bit_keras():
    """Weights, slots and losses of whole fits equal the stock update's bit for
    bit (Adam, AdamW with weight decay and clipping, a schedule with other betas
    and epsilon, a loss-scale optimizer, SGD with momentum and clipping, Nesterov
    with a schedule, float64); the kernels ran in those, and not for amsgrad,
    SGD without momentum or inside XLA, which keep the stock update."""
    r = run([sys.executable, "-c", SCRIPT], timeout=600, env=ENV)
    assert r.returncode == 0, r.stdout
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(out["equal"].values()), out
    assert all(out["agrees"].values()), out
    # one check per optimizer, dtype and set of hyperparameters
    assert set(out["agrees"]) == {"Adam float32 0.9 0.999 1e-07", "Adam float32 0.8 0.95 0.0001",
                                  "Adam float64 0.9 0.999 1e-07", "SGD float32 0.9 0.0",
                                  "SGD float32 0.8 1.0", "SGD float64 0.8 1.0"}, out
    for name in ("adam", "adamw_clipnorm", "adam_schedule", "loss_scale", "float64",
                 "sgd_momentum", "sgd_nesterov", "sgd_float64"):
        assert out["calls"][name] > 0, (name, out)
    for name in ("amsgrad", "sgd_plain", "xla"):
        assert out["calls"][name] == 0, (name, out)


BAD_INPUT = r"""
import numpy as np, tensorflow as tf
from tfmpi.tensorflow import ops
f = ops._lib.tfmpi_apply_adam
momentum = ops._lib.tfmpi_apply_momentum
var, m, v = (tf.Variable(np.ones(4, "float32")) for _ in range(3))
one = tf.constant(0.1)
def attempt(**kw):
    args = dict(var=var.handle, m=m.handle, v=v.handle, grad=tf.ones(4), one_minus_beta_1=one,
                one_minus_beta_2=one, alpha=one, epsilon=one)
    args.update(kw)
    try:
        f(**args)
    except tf.errors.OpError as e:
        print(type(e).__name__, "|", e.message)
attempt(grad=tf.ones(5))
attempt(m=var.handle)
attempt(alpha=tf.ones(2))
try:
    momentum(var=var.handle, m=m.handle, grad=tf.ones(5), momentum=one, lr=one, nesterov=False)
except tf.errors.InvalidArgumentError as e:
    print("momentum refused:", e.message)
print("var", var.numpy().tolist())
# a value read before the update shares the variable's buffer: it must be
# copied before the kernel writes, as TensorFlow's own update kernels do
before = var.read_value()
f(var=var.handle, m=m.handle, v=v.handle, grad=tf.ones(4), one_minus_beta_1=one,
  one_minus_beta_2=one, alpha=one, epsilon=one)
print("read before", before.numpy().tolist(), "after", var.numpy().tolist() != [1.0] * 4)
"""


def test_the_kernel_refuses_bad_input_and_leaves_the_variables_alone():
    r = run([sys.executable, "-c", BAD_INPUT], timeout=120, env=ENV)
    assert r.returncode == 0, r.stdout
    lines = [ln for ln in r.stdout.splitlines() if "|" in ln]
    assert len(lines) == 3, r.stdout
    assert lines[0].startswith("InvalidArgumentError") and "gradient" in lines[0], lines
    assert "distinct" in lines[1], lines
    assert "must be a scalar" in lines[2], lines
    refused = [ln for ln in r.stdout.splitlines() if ln.startswith("momentum refused:")]
    assert len(refused) == 1 and "TfmpiApplyMomentum: var is" in refused[0], r.stdout
    assert "var [1.0, 1.0, 1.0, 1.0]" in r.stdout
    assert "read before [1.0, 1.0, 1.0, 1.0] after True" in r.stdout, r.stdout


DISAGREE = r"""
import numpy as np, keras
from tfmpi.transparent import fused_updates
fused_updates._run_check = lambda *a: False  # as if this machine's stock ops rounded otherwise
fused_updates.install()
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
model.compile(keras.optimizers.Adam(), "mse")
model.fit(np.ones((8, 3)), np.ones((8, 2)), epochs=2, verbose=0)
model.fit(np.ones((8, 3)), np.ones((8, 2)), epochs=1, verbose=0)
print("agrees", fused_updates._agrees)
"""


def test_a_disagreeing_check_keeps_the_stock_update_and_says_so_once():
    r = run([sys.executable, "-c", DISAGREE], timeout=120, env=ENV)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("the fused update (TFMPI_FUSED_UPDATES) is not used") == 1, r.stdout
    assert "agrees {('Adam', 'float32', 0.9, 0.999, 1e-07): False}" in r.stdout


UNDER_TFMPIRUN = r"""
import json, os, sys
import numpy as np, keras
keras.utils.set_random_seed(5)
rng = np.random.default_rng(0)
x = rng.standard_normal((192, 40)).astype("float32")
y = (x[:, :3] @ rng.standard_normal((3, 4))).astype("float32")
model = keras.Sequential([keras.Input((40,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(4)])
model.compile(keras.optimizers.AdamW(3e-3, weight_decay=0.01), "mse")
hist = model.fit(x, y, batch_size=48, epochs=3, shuffle=False, verbose=0)
fused = sys.modules.get("tfmpi.transparent.fused_updates")
json.dump({"loss": hist.history["loss"],
           "weights": [w.tobytes().hex() for w in model.get_weights()],
           "checks": len(fused._agrees) if fused else 0}, open(sys.argv[1] + os.environ["RANK"], "w"))
"""


@pytest.mark.parametrize("sharded", ["0", "1"])
def test_under_tfmpirun_the_fused_update_changes_no_bit(tmp_path, sharded):
    """tfmpirun -np 2 with the fused update (the default) and with
    TFMPI_FUSED_UPDATES=0 train to the same bits on every rank, with the full
    update on every rank and with the sharded update (where only owners run
    it); the kernel ran only in the first."""
    script = tmp_path / "train.py"
    script.write_text(UNDER_TFMPIRUN.replace('os.environ["RANK"]',
                                             'os.environ.get("OMPI_COMM_WORLD_RANK", '
                                             'os.environ.get("PMI_RANK", "0"))'))
    results = {}
    for fused in ("1", "0"):
        out = tmp_path / f"fused{fused}-"
        r = run(["tfmpirun", "-np", "2", sys.executable, str(script), str(out)], 300,
                env=dict(ENV, TF_NUM_INTRAOP_THREADS="1", TFMPI_FUSED_UPDATES=fused,
                         TFMPI_SHARDED_UPDATE=sharded,
                         # slices that follow measured speeds would change the sums' order
                         TFMPI_SHARES="equal"))
        assert r.returncode == 0, r.stdout
        results[fused] = [json.loads((tmp_path / f"fused{fused}-{rank}").read_text())
                          for rank in (0, 1)]
    for rank in (0, 1):
        fused, stock = results["1"][rank], results["0"][rank]
        assert fused["checks"] == 1 and stock["checks"] == 0, (fused["checks"], stock["checks"])
        assert fused["loss"] == stock["loss"] and fused["weights"] == stock["weights"], rank
