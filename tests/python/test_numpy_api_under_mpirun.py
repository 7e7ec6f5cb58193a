"""Runs the per-rank numpy API checks (ranks/check_*.py) under mpirun -np K."""

import os
import sys

import pytest

from mpirun_util import HERE, run_python


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_numpy_api(np_):
    result = run_python(np_, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no",
                              "-o", "python_files=check_*.py", os.path.join(HERE, "ranks")],
                        timeout=300)
    assert result.returncode == 0, result.stdout
    # every rank ran and passed the same number of checks
    summaries = [l for l in result.stdout.splitlines() if " passed" in l and " in " in l]
    assert len(summaries) == np_, result.stdout
    assert "failed" not in "".join(summaries), result.stdout
