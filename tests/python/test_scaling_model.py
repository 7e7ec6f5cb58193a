"""The alpha-beta scaling model of bench/scaling/model.py (docs/scaling.md):
its limits, its calibration, and the bracket the docs draw around Horovod's
published figure. Pure arithmetic: no processes."""

import importlib.util
import math
import os

import pytest

pytestmark = pytest.mark.quick  # the quick tier runs it (scripts/test.sh quick)

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "scaling", "model.py")
_spec = importlib.util.spec_from_file_location("scaling_model", _PATH)
model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model)

LINK = model.Link("25 Gbit/s", 5e-6, 0.9 * 25e9 / 8)
RANKS = [2, 4, 8, 16, 64, 256, 1024]


def test_one_rank_costs_nothing_but_compute():
    assert model.allreduce_s(1e8, 1, LINK, gamma=1e-10) == 0.0
    assert model.step_s(0.5, 1e8, 1, LINK, fixed_s=1e-3) == 0.5
    assert model.efficiency(0.5, 1e8, 1, LINK) == 1.0


def test_bandwidth_term_tends_to_twice_the_bytes_over_the_link():
    no_latency = model.Link("x", 0.0, LINK.bytes_per_s)
    t = model.allreduce_s(1e8, 1024, no_latency)
    assert t == pytest.approx(2 * (1023 / 1024) * 1e8 / LINK.bytes_per_s)
    assert t < 2 * 1e8 / LINK.bytes_per_s


def test_latency_grows_with_log2_of_the_ranks_and_the_collectives():
    a = model.allreduce_s(0, 1024, LINK, collectives=3)
    assert a == pytest.approx(3 * 2 * 10 * LINK.alpha_s)
    assert model.allreduce_s(0, 1000, LINK) == pytest.approx(2 * 10 * LINK.alpha_s)


def test_efficiency_never_rises_with_more_ranks():
    for overlap in (False, True):
        eff = [model.efficiency(0.3, 1e8, p, LINK, gamma=1e-10, overlap=overlap, fixed_s=1e-3,
                                collectives=30) for p in RANKS]
        assert all(a >= b for a, b in zip(eff, eff[1:])), eff
        assert all(0 < e <= 1 for e in eff)


def test_overlap_hides_at_most_the_backward_pass_and_never_the_last_collective():
    comm = model.allreduce_s(1e8, 64, LINK, collectives=4)
    # Plenty of compute: all but the last collective's share is hidden.
    big = model.step_s(10.0, 1e8, 64, LINK, overlap=True, collectives=4)
    assert big - 10.0 - 2 * 6 * LINK.alpha_s == pytest.approx(comm / 4)
    # Little compute: at most two thirds of it hides communication.
    small = model.step_s(0.03, 1e8, 64, LINK, overlap=True, collectives=4)
    none = model.step_s(0.03, 1e8, 64, LINK, overlap=False, collectives=4)
    assert none - small == pytest.approx(0.02)
    assert small <= none


def test_calibration_recovers_the_link_it_was_made_from():
    truth = model.Link("t", 40e-6, 3e9)
    gamma = 1.5e-10
    points = [(n, model.allreduce_s(n, 2, truth, gamma)) for n in (4096, 65536, 1 << 20, 16 << 20)]
    fitted = model.calibrate(points, 2, gamma)
    assert fitted.alpha_s == pytest.approx(truth.alpha_s, rel=1e-6)
    assert fitted.bytes_per_s == pytest.approx(truth.bytes_per_s, rel=1e-6)


def test_fit_rejects_what_it_cannot_fit():
    with pytest.raises(ValueError):
        model.fit_line([(1, 1.0)])
    with pytest.raises(ValueError):
        model.fit_line([(5, 1.0), (5, 2.0)])
    with pytest.raises(ValueError):
        model.fit_line([(1, 0.0), (2, 1.0)])


def test_horovods_published_figure_lies_between_no_overlap_and_full_overlap():
    # ResNet-101 on Horovod's cluster (docs/scaling.md): 178.4 MB of gradients in
    # 81 collectives, a 0.618 s P100 step, 512 GPUs on 25 Gbit/s RoCE.
    kw = dict(gamma=1.5e-10, fixed_s=0.65e-3, collectives=81)
    none = model.efficiency(0.618, 178.4e6, 512, LINK, overlap=False, **kw)
    full = model.efficiency(0.618, 178.4e6, 512, LINK, overlap=True, **kw)
    assert none < 0.90 < full
    assert math.isclose(none, 0.79, abs_tol=0.02)
