"""Fidelity: an unmodified script under `tfmpirun -np N` behaves like the
1-process run (the math of docs/design: global batch, weighted gradients).

For each kind of training (model.fit; a custom GradientTape loop; a model
with BatchNormalization in synchronized mode; Embedding gradients under a
LossScaleOptimizer with global_clipnorm; steps_per_epoch on a repeating
dataset with sample weights; a custom loop whose loss sums over the batch;
with tf_keras, a Keras 2 style train_step) the
plain 1-process run and `tfmpirun -np 2, 3, 4` must give per-step losses
within 1e-5 relative over more than 100 steps, final weights bitwise
identical on every rank, exactly one checkpoint (model.fit), and output from
rank 0 only. The kinds run with Keras 3 and again with tf_keras
(TF_USE_LEGACY_KERAS=1, the scripts taking tf.keras).
"""

import glob
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow")
pytest.importorskip("sklearn")

FIDELITY = os.path.join(HERE, "fidelity")
RTOL = 1e-5
KERAS3_KINDS = {
    "fit": (["train_fit.py"], {}),
    "custom_loop": (["train_custom_loop.py"], {}),
    "custom_loop_sum_loss": (["train_custom_loop.py", "sum"], {}),
    "fit_sync_batchnorm": (["train_fit.py", "bn"], {"TFMPI_SYNC_BATCHNORM": "1"}),
    "sparse_lossscale_clipnorm": (["train_sparse_lso_clip.py"], {}),
    "fit_steps_per_epoch_sample_weight": (["train_fit_options.py"], {}),
}
LEGACY = {"TF_USE_LEGACY_KERAS": "1"}
TF_KERAS_KINDS = {f"tf_keras_{kind}": (args, {**env, **LEGACY})
                  for kind, (args, env) in KERAS3_KINDS.items()}
TF_KERAS_KINDS["tf_keras_keras2_train_step"] = (["train_keras2_step.py"], LEGACY)
if importlib.util.find_spec("tf_keras") is None:  # optional for users; setup.sh installs it
    TF_KERAS_KINDS = {}
KINDS = {**KERAS3_KINDS, **TF_KERAS_KINDS}
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def _losses(out):
    return {p: json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "losses-*.json")))}


def _weights(out):
    return [np.load(p) for p in sorted(glob.glob(os.path.join(out, "weights-*.npy")))]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The plain 1-process runs (python, no tfmpirun), one per kind."""
    refs = {}
    for kind, (args, env) in KINDS.items():
        out = tmp_path_factory.mktemp(f"ref-{kind}")
        script, *rest = args
        r = run([sys.executable, os.path.join(FIDELITY, script), str(out)] + rest, timeout=300,
                env={**QUIET, **env})
        assert r.returncode == 0, r.stdout
        (losses,) = _losses(str(out)).values()
        refs[kind] = (losses, r.stdout)
    return refs


# The three kinds the issue names run at 2, 3 and 4 ranks with Keras 3; the
# others at 2 or 3, every tf_keras kind at 2 (tf_keras fit also at 3).
CASES = [(kind, n) for kind in ("fit", "custom_loop", "fit_sync_batchnorm") for n in (2, 3, 4)]
CASES += [("sparse_lossscale_clipnorm", 2), ("fit_steps_per_epoch_sample_weight", 3),
          ("custom_loop_sum_loss", 3)]
CASES += [(kind, 2) for kind in TF_KERAS_KINDS]
if TF_KERAS_KINDS:
    CASES.append(("tf_keras_fit", 3))


@pytest.mark.parametrize("kind,np_", CASES)
def test_matches_one_process_run(kind, np_, reference, tmp_path):
    args, env = KINDS[kind]
    script, *rest = args
    r = run(["tfmpirun", "-np", str(np_), sys.executable, os.path.join(FIDELITY, script),
             str(tmp_path)] + rest, timeout=600, env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    ref_losses, ref_stdout = reference[kind]
    assert len(ref_losses) >= 100

    per_rank = _losses(str(tmp_path))
    assert len(per_rank) == np_, f"expected one loss file per rank: {list(per_rank)}"
    for path, losses in per_rank.items():
        assert len(losses) == len(ref_losses), path
        np.testing.assert_allclose(losses, ref_losses, rtol=RTOL, err_msg=path)

    weights = _weights(str(tmp_path))
    assert len(weights) == np_
    for w in weights[1:]:
        assert np.array_equal(w, weights[0]), "final weights differ between ranks"

    if script == "train_fit.py":
        assert len(glob.glob(os.path.join(str(tmp_path), "ckpt-*.weights.h5"))) == 1

    # only rank 0 prints: the same lines as the 1-process run, once
    def lines(text, tag):
        return [l for l in text.splitlines() if l.startswith(tag)]
    assert len(lines(r.stdout, "RUN_DONE")) == 1, r.stdout
    assert len(lines(r.stdout, "EPOCH")) == len(lines(ref_stdout, "EPOCH"))
