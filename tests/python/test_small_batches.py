"""Batches with fewer rows than ranks are computed whole by every rank, never
split into empty slices (Note [Batches smaller than the ranks],
python/tfmpi/transparent/batching.py), in every Keras layer family.

fidelity/small_batches.py predicts and evaluates batches of 1, 2 and 3 rows
and trains epochs whose last batch has 1, 2 or 3 rows, from numpy arrays and
from sharded tf.data pipelines (fit, evaluate, predict, a custom loop), with
convolutions of every kind (transposed, separable, depthwise, 1D/2D/3D),
pooling, recurrent layers, attention, BatchNormalization, merging layers and
random layers. Every rank of `tfmpirun -np N` (N = 2, 3, 4; tf_keras at 2) must give what the
1-process run gives: the predictions, the evaluation results and losses to
1e-5, the final weights to 1e-4 (of the largest weight, as the fidelity tier
compares them), and the ranks' weights bitwise alike. Before batches smaller
than N were computed whole, the transposed convolutions failed on the ranks
that got no rows ("Conv2DCustomBackpropInput: input and out_backprop must
have the same batch size").
"""

import glob
import os
import sys

import numpy as np
import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="the small-batch test needs TensorFlow")

SCRIPT = os.path.join(HERE, "fidelity", "small_batches.py")
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}
LEGACY = {"TF_USE_LEGACY_KERAS": "1"}


def _outputs(folder):
    return [dict(np.load(p)) for p in sorted(glob.glob(os.path.join(str(folder), "small-*.npz")))]


def _run(out, env, launcher=(), rows=None):
    out.mkdir(exist_ok=True)
    r = run(list(launcher) + [sys.executable, SCRIPT, str(out)] + ([rows] if rows else []),
            timeout=600, env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    return _outputs(out)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    made = {}

    def get(line):
        if line not in made:
            env = LEGACY if line == "tf_keras" else {}
            (made[line],) = _run(tmp_path_factory.mktemp(f"ref-{line}"), env)
        return made[line]

    return get


@pytest.mark.parametrize("line,np_", [("keras3", 2), ("keras3", 3), ("keras3", 4),
                                      ("tf_keras", 2)])
def test_every_layer_family_on_batches_smaller_than_the_ranks(line, np_, reference, tmp_path):
    if line == "tf_keras":
        pytest.importorskip("tf_keras", reason="tf_keras is not installed (scripts/setup.sh installs it)")
    env = LEGACY if line == "tf_keras" else {}
    ref = reference(line)
    # batches of 1 .. N-1 rows (the reference has 1, 2 and 3)
    rows = ",".join(str(k) for k in range(1, np_))
    ranks = _run(tmp_path / "ranks", env, ["tfmpirun", "-np", str(np_)], rows)
    assert len(ranks) == np_, f"expected one output per rank, got {len(ranks)}"
    # every output of those batches (predict1, fit2, ...) and those of every run (weights, ...)
    keys = [k for k in ref if not k[-1].isdigit() or int(k[-1]) < np_]
    assert sorted(ranks[0]) == sorted(keys)
    for r, got in enumerate(ranks):
        for key in keys:
            want = ref[key]
            assert got[key].shape == want.shape, f"rank {r}, {key}: shape {got[key].shape}, " \
                                                 f"1-process {want.shape}"
            scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
            off = float(np.abs(got[key] - want).max()) if want.size else 0.0
            tol = 1e-4 if "weights" in key else 1e-5
            assert off <= tol * scale, f"rank {r}, {key}: {off:.3g} from the 1-process run"
        if r:
            for key in keys:
                if "weights" in key:
                    assert np.array_equal(got[key], ranks[0][key]), f"rank {r}, {key}: differs " \
                                                                    "from rank 0's"
