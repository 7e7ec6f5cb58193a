"""A script that trains differently on each rank is stopped with an error
naming the step and the variable (Note [Weight agreement],
python/tfmpi/transparent/weight_check.py): scripts/rank_dependent.py sets its
learning rate from the MPI rank, in model.fit and in a custom loop that
updates by hand. Before, both trained the ranks apart without a word."""

import os
import sys

import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="the weight check runs in TensorFlow scripts")


@pytest.mark.parametrize("mode,where", [("fit", "fit"), ("loop", "a custom loop")])
def test_ranks_that_train_apart_are_stopped_at_the_first_step(mode, where):
    r = run(["tfmpirun", "-np", "2", sys.executable,
             os.path.join(HERE, "scripts", "rank_dependent.py"), mode],
            timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert r.returncode != 0, r.stdout
    assert "TRAINED" not in r.stdout
    assert (f"WeightMismatchError: tfmpi: in {where}, after step 1: variable "
            "'sequential/hidden/kernel'") in r.stdout, r.stdout
    assert "differs on ranks [1] from rank 0's" in r.stdout
