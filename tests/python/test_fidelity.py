"""Fidelity: an unmodified script under `tfmpirun -np N` behaves like the
1-process run (the math of docs/design: global batch, weighted gradients).

Each kind of training is a script in fidelity/ (plain Keras; the scripts
never import tfmpi). The plain 1-process run and `tfmpirun -np N` must give,
on every rank: the same per-step losses (within 1e-5 relative, plus the
rounding bound of recovering a step's loss from Keras' running mean, see
fidelity/common.py), the same evaluation results and extra values (1e-5),
final weights bitwise identical across ranks and within 1e-4 of the
1-process run's, exactly one checkpoint where the script writes one, and
output from rank 0 only. Kinds run with Keras 3 and, where marked, again with
tf_keras (TF_USE_LEGACY_KERAS=1, the scripts taking tf.keras). A kind whose
Keras line is missing is skipped with the reason, never left out.

Starting a process costs more here than most kinds' training (importing
TensorFlow alone is about 3.5 s of CPU), so the kinds run in groups, as a
user's script that trains several models in turn: one `tfmpirun -np N` for all
the selected variants with the same rank count and tfmpi settings, and one
plain process for the 1-process runs of each Keras line (scripts/run_in_turn.py
clears the Keras session between kinds). Each variant is still its own test,
checked on its own folder and its own part of the output; a kind that fails
fails its test and those of the kinds after it in its process.
"""

import glob
import importlib.util
import os

import pytest

import fidelity_check
from fidelity_check import launch

pytest.importorskip("tensorflow", reason="the fidelity tier needs TensorFlow")
pytest.importorskip("sklearn", reason="the fidelity scripts train on scikit-learn's digits")

LEGACY = {"TF_USE_LEGACY_KERAS": "1"}
SHARDED = {"TFMPI_SHARDED_UPDATE": "1"}
# On one host the default shares are equal (Note [Shares by default]); the kinds
# marked ADAPTIVE run the adaptive ones that are the default across hosts: slices
# cut at bounds read from a variable, rebalanced every 10 steps.
ADAPTIVE = {"TFMPI_SHARES": "adaptive"}

# kind: (script and arguments, environment, rank counts with Keras 3, with tf_keras).
# tf_keras runs the kinds whose code paths differ from Keras 3's (its own trainer,
# optimizers, metrics, BatchNormalization, RNG, masked losses, saving).
# Rank counts: `fit` runs at 2, 3 and 4 ranks, fit_sync_batchnorm at 2 and 4,
# fit_sharded_update at 2 and 3, every other kind at one count: a second would
# repeat what the first checks (at 2 ranks the ragged last batch of every epoch,
# in most kinds, is already split unequally). The 3-rank runs (an odd count of
# ranks; shares of 1/3 that round) are those and the kinds marked (3,).
KINDS = {
    "fit": (["train_fit.py"], {}, (2, 3, 4), (2,)),
    # the autotune search changes the message size and fusion thresholds between steps
    # (Note [Autotune]); the math must not notice
    "fit_autotune": (["train_fit.py"], {"TFMPI_AUTOTUNE": "1"}, (3,), ()),
    # gradients reduced in buckets of ~1 KiB as the backward pass makes them
    # (Note [Gradient buckets]): several ops per step, the same sums
    "fit_gradient_buckets": (["train_fit.py"], {"TFMPI_GRADIENT_BUCKET_BYTES": "1024"}, (2,), ()),
    "custom_loop": (["train_custom_loop.py"], ADAPTIVE, (2,), (2,)),
    "custom_loop_sum_loss": (["train_custom_loop.py", "sum"], {}, (3,), ()),
    # TensorFlow without Keras: a tf.Module, a loss by hand, updates by hand or by a Keras
    # optimizer, accumulated and clipped gradients (Note [Gradients reduced at the tape])
    "tf_module": (["train_tf_module.py"], {}, (3,), (2,)),
    # synchronized BatchNormalization, the default (Note [Synchronized by default])
    "fit_sync_batchnorm": (["train_fit.py", "bn"], {**ADAPTIVE},
                           (2, 4), (2,)),
    "sparse_lossscale_clipnorm": (["train_sparse_lso_clip.py"], {}, (2,), ()),
    "embedding_adam": (["train_sparse_lso_clip.py", "adam"], {}, (2,), ()),
    "fit_steps_per_epoch_sample_weight": (["train_fit_options.py"], {}, (3,), ()),
    "keras2_train_step": (["train_keras2_step.py"], {}, (), (2,)),
    # fit, then a custom loop; tf_keras: fit only (its default RNG is not exact in custom
    # loops, docs/transparent.md)
    "random_layers": (["train_random.py"], {}, (2,), ()),
    # shares fixed at 1 : 1 : 0.1 (as if probed): rank 2's share of the ragged last batch
    # (5 rows) rounds to nothing, so it is moved to give it a row (Note [Work shares])
    "random_layers_uneven_shares": (["train_random.py", "fit"],
                                    {"TFMPI_PROBE_SPEEDS": "1,1,0.1", "TFMPI_REBALANCE_STEPS": "0"},
                                    (3,), ()),
    # every pass (fit and evaluate) ends with a batch of one sample, which every rank
    # computes whole (Note [Batches smaller than the ranks], batching.py)
    "random_layers_last_batch_of_one": (["train_random.py", "fit", "1793"], {}, (3,), ()),
    "tf_keras_random_layers_fit": (["train_random.py", "fit"], {}, (), (2,)),
    # draws that take the other ranks' rows: a shuffle of the batch's rows (mixup with a
    # shuffled copy of the batch) and per-row binomial counts (Note [Random draws under a
    # split batch]); 1797 = 28 x 64 + 5, a last batch of 2 + 2 + 1
    "random_rows": (["train_random.py", "rows"], {}, (3,), ()),
    "gan_two_optimizers": (["train_gan.py"], {}, (2,), ()),
    "add_loss_subclassed_and_dict_inputs": (["train_add_loss.py"], {}, (2,), ()),
    "masked_lstm_and_mean_with_sample_weight": (["train_masked_lstm.py"], ADAPTIVE, (2,), (2,)),
    "lr_and_early_stopping": (["train_callbacks.py"], {}, (2,), ()),
    "save_then_load": (["train_save_load.py"], {}, (2,), (2,)),
    "compute_average_loss": (["train_average_loss.py"], {}, (2,), ()),
    "input_pipeline": (["train_input_pipeline.py"], ADAPTIVE, (2,), (2,)),
    # each rank updates the variables it owns (Note [Sharded update]); the saved optimizer
    # state is brought from the owners; a LossScaleOptimizer with global_clipnorm and
    # sparse gradients run the full update instead, as without it
    "fit_sharded_update": (["train_fit.py"], {**SHARDED, **ADAPTIVE}, (2, 3), ()),
    "custom_loop_sharded_update": (["train_custom_loop.py"], SHARDED, (2,), ()),
    "gan_two_optimizers_sharded_update": (["train_gan.py"], SHARDED, (3,), ()),
    "save_then_load_sharded_update": (["train_save_load.py"], SHARDED, (2,), ()),
    "sparse_lossscale_clipnorm_sharded_update": (["train_sparse_lso_clip.py"], SHARDED, (2,), ()),
}


# Kinds that train with Adam or RMSprop, which normalise their step and so train
# alike with a wrong gradient scale (a sum in place of a mean): each runs again
# with plain SGD in their place (fidelity/common.py, optimizer), as <kind>_sgd, at
# its first rank count and on its first Keras line.
SGD = {"FIDELITY_SGD": "0.05"}
ADAPTIVE_OPTIMIZERS = [
    "custom_loop", "fit_steps_per_epoch_sample_weight", "keras2_train_step", "random_layers",
    "random_layers_uneven_shares", "random_layers_last_batch_of_one",
    "tf_keras_random_layers_fit", "gan_two_optimizers", "add_loss_subclassed_and_dict_inputs",
    "masked_lstm_and_mean_with_sample_weight", "lr_and_early_stopping", "save_then_load",
    "custom_loop_sharded_update", "gan_two_optimizers_sharded_update",
    "save_then_load_sharded_update",
]
for _kind in ADAPTIVE_OPTIMIZERS:
    _args, _env, _keras3, _tf_keras = KINDS[_kind]
    KINDS[f"{_kind}_sgd"] = (_args, {**_env, **SGD}, _keras3[:1], () if _keras3 else _tf_keras[:1])


def _variants():
    """(variant name, kind, environment) for every kind and Keras line."""
    out = []
    for kind, (args, env, keras3, tf_keras) in KINDS.items():
        if keras3:
            out.append((kind, kind, env))
        if tf_keras:
            name = kind if kind.startswith("tf_keras_") else f"tf_keras_{kind}"
            out.append((name, kind, {**env, **LEGACY}))
    return out


# TFMPI_FIDELITY_SIZES=2 runs every kind at 2 ranks only (the test command's
# second pass, with the oldest supported Keras 3).
SIZES = {int(n) for n in os.environ.get("TFMPI_FIDELITY_SIZES", "2,3,4").split(",")}
VARIANTS = {name: (kind, env) for name, kind, env in _variants()}
CASES = [(name, n) for name, kind, env in _variants()
         for n in KINDS[kind][3 if "TF_USE_LEGACY_KERAS" in env else 2] if n in SIZES]


def _process_env(name):
    """What the variant's whole process is given: tfmpi's settings (read at
    start-up) and the Keras line."""
    return {k: v for k, v in VARIANTS[name][1].items()
            if k.startswith("TFMPI_") or k == "TF_USE_LEGACY_KERAS"}


def _kind_spec(name):
    """(name, script and arguments, the kind's own environment) for run_in_turn.py."""
    kind, env = VARIANTS[name]
    own = {k: v for k, v in env.items() if k not in _process_env(name)}
    script, *args = KINDS[kind][0]
    return name, [f"fidelity/{script}", *args], own


def _require_keras_line(name):
    if "TF_USE_LEGACY_KERAS" in VARIANTS[name][1] and importlib.util.find_spec("tf_keras") is None:
        pytest.skip("tf_keras is not installed (scripts/setup.sh installs it)")


def _selected(request):
    """The (name, np) cases of this test that the session runs (after -k)."""
    cases = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if getattr(item, "originalname", None) == "test_matches_one_process_run" and spec:
            cases.append((spec.params["name"], spec.params["np_"]))
    return cases


@pytest.fixture(scope="module")
def reference(request, tmp_path_factory):
    """The plain 1-process runs (python, no tfmpirun), all the selected variants of
    one Keras line in one process (scripts/run_in_turn.py), made at the first
    request. TFMPI_* settings are left out: a plain run does not load tfmpi, so
    variants that differ only in those (fit, fit_autotune, fit_sharded_update, ...)
    share one reference run."""
    made = {}

    def key(name):
        spec = _kind_spec(name)
        return tuple(spec[1]), tuple(sorted(spec[2].items())), "TF_USE_LEGACY_KERAS" in \
            VARIANTS[name][1]

    def get(name):
        if key(name) not in made:
            legacy = key(name)[2]
            todo = {}
            for other, _ in _selected(request):
                if key(other)[2] == legacy and key(other) not in made:
                    todo.setdefault(key(other), _kind_spec(other))
            line = "tf_keras" if legacy else "keras3"
            runs = fidelity_check.reference_kinds(list(todo.values()), LEGACY if legacy else {},
                                                  tmp_path_factory.mktemp(f"ref-{line}"))
            for k, spec in todo.items():
                made[k] = runs[spec[0]]
        return made[key(name)]

    return get


@pytest.fixture(scope="module")
def launched(request, tmp_path_factory):
    """`tfmpirun -np N` of every selected variant with the same rank count and
    process environment, in one process per rank (scripts/run_in_turn.py), made
    at the first request: (CompletedProcess or the AssertionError of a timeout,
    {name: its output}, folder)."""
    made = {}

    def group(name, np_):
        return np_, tuple(sorted(_process_env(name).items()))

    def get(name, np_):
        g = group(name, np_)
        if g not in made:
            names = [n for n, k in _selected(request) if group(n, k) == g]
            root = tmp_path_factory.mktemp(f"np{np_}")
            try:
                r, parts = fidelity_check.launch_kinds(
                    ["tfmpirun", "-np", str(np_)], [_kind_spec(n) for n in names], root,
                    _process_env(name), timeout=120 + 60 * len(names))
            except AssertionError as e:  # a hang: every kind of the group fails with it
                r, parts = e, {}
            made[g] = (r, parts, root)
        return made[g]

    return get


@pytest.mark.parametrize("name,np_", CASES)
def test_matches_one_process_run(name, np_, reference, launched):
    _require_keras_line(name)
    kind, _ = VARIANTS[name]
    ref = reference(name)
    assert len(ref[0]["losses"]) >= 40, "a fidelity run needs enough steps to show a drift"
    r, parts, root = launched(name, np_)
    if isinstance(r, AssertionError):
        raise r
    fidelity_check.finished(r, parts, name)
    out = os.path.join(str(root), name)
    fidelity_check.assert_matches(ref, out, np_, parts[name])
    if "TFMPI_AUTOTUNE" in VARIANTS[name][1]:
        assert "autotune: searching from" in r.stdout, r.stdout
    if KINDS[kind][0][0] == "train_fit.py":
        assert len(glob.glob(os.path.join(out, "ckpt-*.weights.h5"))) == 1
