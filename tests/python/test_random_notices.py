"""Random draws that cannot be the 1-process draws under a split batch are
named once at run time, by op and by layer (Note [Random draws under a split
batch], python/tfmpi/transparent/randomness.py). The exact ones (a shuffle of
the batch's rows, per-row parameters of the stateless ops) are checked
against the 1-process run by the fidelity kind random_rows."""

import os
import sys

import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="the notices come from TensorFlow's random ops")


def test_each_inexact_draw_is_named_once_with_its_layer():
    r = run(["tfmpirun", "-np", "2", sys.executable, os.path.join(HERE, "scripts",
                                                                   "random_notices.py")],
            timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert r.returncode == 0, r.stdout
    notes = [line for line in r.stdout.splitlines() if line.startswith("tfmpi: note: tf.random")]
    assert len(notes) == 3, r.stdout  # one each, though every step draws again
    shuffle, gamma, uniform = (next(n for n in notes if n.startswith(f"tfmpi: note: {op} "))
                               for op in ("tf.random.shuffle", "tf.random.gamma",
                                          "tf.random.uniform"))
    assert "permute" in shuffle and "indices of the rank's slice" in shuffle
    assert "per_row_gamma" in gamma and "per-row parameters" in gamma
    assert "legacy stateful random op" in uniform and "retraces" in uniform
