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
"""

import glob
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="the fidelity tier needs TensorFlow")
pytest.importorskip("sklearn", reason="the fidelity scripts train on scikit-learn's digits")

FIDELITY = os.path.join(HERE, "fidelity")
RTOL = 1e-5
WEIGHT_TOL = 1e-4
LEGACY = {"TF_USE_LEGACY_KERAS": "1"}
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}

# kind: (script and arguments, environment, rank counts with Keras 3, with tf_keras)
KINDS = {
    "fit": (["train_fit.py"], {}, (2, 3, 4), (2, 3)),
    "custom_loop": (["train_custom_loop.py"], {}, (2, 3, 4), (2,)),
    "custom_loop_sum_loss": (["train_custom_loop.py", "sum"], {}, (3,), (2,)),
    "fit_sync_batchnorm": (["train_fit.py", "bn"], {"TFMPI_SYNC_BATCHNORM": "1"}, (2, 3, 4), (2,)),
    "sparse_lossscale_clipnorm": (["train_sparse_lso_clip.py"], {}, (2,), (2,)),
    "embedding_adam": (["train_sparse_lso_clip.py", "adam"], {}, (2,), ()),
    "fit_steps_per_epoch_sample_weight": (["train_fit_options.py"], {}, (3,), (2,)),
    "keras2_train_step": (["train_keras2_step.py"], {}, (), (2,)),
    # fit, then a custom loop; tf_keras: fit only (its default RNG is not exact in custom
    # loops, docs/transparent.md)
    "random_layers": (["train_random.py"], {}, (2, 3), ()),
    "tf_keras_random_layers_fit": (["train_random.py", "fit"], {}, (), (2,)),
    "gan_two_optimizers": (["train_gan.py"], {}, (2, 3), ()),
    "add_loss_subclassed_and_dict_inputs": (["train_add_loss.py"], {}, (2, 3), ()),
    "masked_lstm_and_mean_with_sample_weight": (["train_masked_lstm.py"], {}, (2, 3), (2,)),
    "lr_and_early_stopping": (["train_callbacks.py"], {}, (2, 3), ()),
    "save_then_load": (["train_save_load.py"], {}, (2, 3), (2,)),
    "compute_average_loss": (["train_average_loss.py"], {}, (2, 3), ()),
}


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


def _require_keras_line(name):
    if "TF_USE_LEGACY_KERAS" in VARIANTS[name][1] and importlib.util.find_spec("tf_keras") is None:
        pytest.skip("tf_keras is not installed (scripts/setup.sh installs it)")


def _runs(out):
    return {p: json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "run-*.json")))}


def _launch(argv, out, env, timeout):
    kind, variant_env = env
    args = KINDS[kind][0]
    return run(argv + [sys.executable, os.path.join(FIDELITY, args[0]), str(out)] + args[1:],
               timeout=timeout, env={**QUIET, **variant_env})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The plain 1-process run (python, no tfmpirun) of a variant, made once."""
    made = {}

    def get(name):
        if name not in made:
            out = tmp_path_factory.mktemp(f"ref-{name}")
            r = _launch([], out, VARIANTS[name], timeout=400)
            assert r.returncode == 0, r.stdout
            (result,) = _runs(str(out)).values()
            values = np.load(glob.glob(os.path.join(str(out), "values-*.npy"))[0])
            made[name] = (result, values, r.stdout)
        return made[name]

    return get


def _assert_same_run(got, ref, where):
    r_loss, g_loss = np.array(ref["losses"]), np.array(got["losses"])
    assert len(g_loss) == len(r_loss), where
    allowed = RTOL * np.abs(r_loss) + np.array(ref["bounds"]) + np.array(got["bounds"])
    off = np.flatnonzero(np.abs(g_loss - r_loss) > allowed)
    assert off.size == 0, (f"{where}: step {off[0]}: loss {g_loss[off[0]]!r}, 1-process "
                           f"{r_loss[off[0]]!r} ({off.size} steps differ)")
    for key in ("eval", "extra"):
        np.testing.assert_allclose(got[key], ref[key], rtol=RTOL, err_msg=f"{where}: {key}")


@pytest.mark.parametrize("name,np_", CASES)
def test_matches_one_process_run(name, np_, reference, tmp_path):
    _require_keras_line(name)
    kind, _ = VARIANTS[name]
    ref, ref_values, ref_stdout = reference(name)
    assert len(ref["losses"]) >= 40, "a fidelity run needs enough steps to show a drift"
    r = _launch(["tfmpirun", "-np", str(np_)], tmp_path, VARIANTS[name], timeout=600)
    assert r.returncode == 0, r.stdout

    per_rank = _runs(str(tmp_path))
    assert len(per_rank) == np_, f"expected one result file per rank: {list(per_rank)}"
    for path, got in per_rank.items():
        _assert_same_run(got, ref, path)

    weights = [np.load(p) for p in sorted(glob.glob(str(tmp_path / "weights-*.npy")))]
    assert len(weights) == np_
    for w in weights[1:]:
        assert np.array_equal(w, weights[0]), "final weights differ between ranks"
    values = np.load(sorted(glob.glob(str(tmp_path / "values-*.npy")))[0])
    drift = np.abs(values - ref_values).max()
    assert drift <= WEIGHT_TOL * max(1.0, np.abs(ref_values).max()), \
        f"final weights drift {drift} from the 1-process run's"

    if KINDS[kind][0][0] == "train_fit.py":
        assert len(glob.glob(os.path.join(str(tmp_path), "ckpt-*.weights.h5"))) == 1

    # only rank 0 prints: the same lines as the 1-process run, once
    def lines(text, tag):
        return [l for l in text.splitlines() if l.startswith(tag)]
    assert len(lines(r.stdout, "RUN_DONE")) == 1, r.stdout
    assert len(lines(r.stdout, "EPOCH")) == len(lines(ref_stdout, "EPOCH"))
