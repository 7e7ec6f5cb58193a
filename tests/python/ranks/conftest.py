import json
import os

import pytest

import tfmpi

_world = {}


@pytest.fixture(scope="session", autouse=True)
def engine():
    tfmpi.init()
    _world.update(rank=tfmpi.rank(), size=tfmpi.size())
    yield
    tfmpi.shutdown()


@pytest.fixture
def rank():
    return tfmpi.rank()


@pytest.fixture
def size():
    return tfmpi.size()


def pytest_sessionfinish(session, exitstatus):
    """Each rank writes its own summary file: ranks' stdout can interleave under mpirun."""
    out_dir = os.environ.get("TFMPI_RANK_RESULTS")
    if not out_dir or "rank" not in _world:
        return
    summary = dict(_world, collected=session.testscollected, failed=session.testsfailed,
                   exitstatus=int(exitstatus))
    with open(os.path.join(out_dir, f"rank-{_world['rank']}.json"), "w") as f:
        json.dump(summary, f)
