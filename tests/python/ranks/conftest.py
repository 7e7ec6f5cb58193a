import pytest

import tfmpi


@pytest.fixture(scope="session", autouse=True)
def engine():
    tfmpi.init()
    yield
    tfmpi.shutdown()


@pytest.fixture
def rank():
    return tfmpi.rank()


@pytest.fixture
def size():
    return tfmpi.size()
