"""Runs the per-rank numpy API checks (ranks/check_*.py) under mpirun -np K."""

import json
import os

import pytest

from mpirun_util import HERE, run_python


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_numpy_api(np_, tmp_path):
    result = run_python(np_, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no",
                              "-o", "python_files=check_*.py", os.path.join(HERE, "ranks")],
                        timeout=300, env={"TFMPI_RANK_RESULTS": str(tmp_path)})
    assert result.returncode == 0, result.stdout
    # every rank wrote its own summary (stdout lines of ranks may interleave) and ran the
    # same checks without a failure
    files = sorted(os.listdir(tmp_path))
    assert files == [f"rank-{r}.json" for r in range(np_)], (files, result.stdout)
    summaries = [json.loads((tmp_path / name).read_text()) for name in files]
    assert all(s["size"] == np_ and s["failed"] == 0 and s["exitstatus"] == 0
               for s in summaries), (summaries, result.stdout)
    assert len({s["collected"] for s in summaries}) == 1, summaries
    assert summaries[0]["collected"] > 0, summaries
