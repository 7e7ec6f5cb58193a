"""How the dense gradients of a step are split into allreduces (Note [Gradient
buckets], transparent/collectives.py). Pure: no processes, no engine."""

import pytest

tf = pytest.importorskip("tensorflow", reason="gradient buckets are TensorFlow tensors")

from tfmpi.transparent import collectives, config, state  # noqa: E402

pytestmark = pytest.mark.quick  # the quick tier runs it (scripts/test.sh quick)


@pytest.fixture
def bucket_bytes(monkeypatch):
    def set_to(n):
        monkeypatch.setattr(state, "options", config.Options(gradient_buckets=n))
    return set_to


def grads(*elements):
    return [tf.zeros([n], tf.float32) for n in elements]


def test_one_allreduce_by_default(bucket_bytes):
    bucket_bytes(0)
    assert collectives._buckets(grads(10, 20, 30), 2) == [[0, 1, 2, 3, 4]]


def test_buckets_in_backward_order_with_the_riders_last(bucket_bytes):
    bucket_bytes(400)  # 100 float32 elements
    # gradients of 50, 60, 200 and 10 elements: from the last, 10 + 200 fills one
    # bucket, 60 + 50 the next; the two riders go with the last bucket
    assert collectives._buckets(grads(50, 60, 200, 10), 2) == [[3, 2], [1, 0, 4, 5]]


def test_every_tensor_is_reduced_exactly_once(bucket_bytes):
    for limit in (1, 100, 4000, 10 ** 9):
        bucket_bytes(limit)
        groups = collectives._buckets(grads(7, 300, 1, 1000, 20), 1)
        assert sorted(i for g in groups for i in g) == list(range(6)), (limit, groups)
        assert groups[-1][-1] == 5  # the rider


def test_an_invalid_bucket_size_is_refused(monkeypatch):
    monkeypatch.setenv("TFMPI_GRADIENT_BUCKET_BYTES", "16M")
    with pytest.raises(SystemExit, match="TFMPI_GRADIENT_BUCKET_BYTES"):
        config.load()
