"""An alpha-beta model of a data-parallel training step (docs/scaling.md):
pure functions, no measurements, so the projections and the tests share them.

One allreduce of n bytes over p ranks, as MPI runs it for large messages
(reduce-scatter by recursive halving, then allgather by recursive doubling;
a ring has the same bandwidth term and a latency term of 2(p-1) alpha):

    t(n, p) = 2 ceil(log2 p) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma

alpha: latency per message; beta: seconds per byte on the link (1 / bandwidth);
gamma: seconds per byte of the reduction itself (summing on the host CPU).
With g ranks per host the ring's hops inside a host run beside the hops across
hosts, so the link of each host carries the same 2 (p-1)/p n bytes: the bandwidth
term does not depend on g.

A step: compute (forward, backward, update) of one rank's share of the batch,
then the gradient allreduce, of which `overlap` can hide up to the backward pass
(two thirds of compute) except the last of its collectives, plus tfmpi's fixed cost per step (the negotiation AND,
2 ceil(log2 p) alpha, and the measured software cost).
"""

import math
from dataclasses import dataclass

BACKWARD_FRACTION = 2.0 / 3.0  # backward ~ 2x forward


@dataclass(frozen=True)
class Link:
    name: str
    alpha_s: float        # latency per message
    bytes_per_s: float    # achievable bandwidth per host link

    @property
    def beta(self):
        return 1.0 / self.bytes_per_s


def log2_ceil(p):
    return math.ceil(math.log2(p)) if p > 1 else 0


def allreduce_s(nbytes, p, link, gamma=0.0, collectives=1):
    """Seconds for `collectives` allreduces that together move `nbytes`."""
    if p <= 1:
        return 0.0
    share = (p - 1) / p
    return (collectives * 2 * log2_ceil(p) * link.alpha_s
            + 2 * share * nbytes * link.beta + share * nbytes * gamma)


def step_s(compute_s, grad_bytes, p, link, gamma=0.0, overlap=False, fixed_s=0.0,
           collectives=1):
    """Seconds per step at p ranks, each computing `compute_s` on its share."""
    comm = allreduce_s(grad_bytes, p, link, gamma, collectives)
    # The gradients produced last (the first layers') can only be reduced
    # after the backward pass: at least one collective's share stays exposed.
    hidden = min(comm * (1 - 1 / collectives), BACKWARD_FRACTION * compute_s) if overlap else 0.0
    negotiation = 2 * log2_ceil(p) * link.alpha_s if p > 1 else 0.0
    return compute_s + comm - hidden + (fixed_s + negotiation if p > 1 else 0.0)


def efficiency(compute_s, grad_bytes, p, link, **kw):
    """Scaling efficiency with the per-rank batch fixed (weak scaling, as the
    published GPU figures are measured): one rank's step over the p-rank step."""
    return compute_s / step_s(compute_s, grad_bytes, p, link, **kw)


def fit_line(points):
    """Least squares t = a + b n over [(n, t)], each point weighted by 1/t^2 (so
    relative errors count: the small sizes fix a, the large ones b). (a, b)."""
    if len(points) < 2:
        raise ValueError("need at least two (size, seconds) points")
    if any(t <= 0 for _, t in points):
        raise ValueError("times must be positive")
    w = [1.0 / (t * t) for _, t in points]
    sw = sum(w)
    sx = sum(wi * n for wi, (n, _) in zip(w, points))
    sy = sum(wi * t for wi, (_, t) in zip(w, points))
    sxx = sum(wi * n * n for wi, (n, _) in zip(w, points))
    sxy = sum(wi * n * t for wi, (n, t) in zip(w, points))
    den = sw * sxx - sx * sx
    if den <= 0:
        raise ValueError("the sizes must differ")
    b = (sw * sxy - sx * sy) / den
    return (sy - b * sx) / sw, b


def calibrate(points, p, gamma):
    """The Link that reproduces measured allreduce times [(bytes, seconds)] at p
    ranks, given the reduction's gamma: intercept -> alpha, slope -> beta."""
    a, b = fit_line(points)
    share = (p - 1) / p
    alpha = max(a, 0.0) / (2 * log2_ceil(p))
    beta = max(b - share * gamma, 1e-15) / (2 * share)
    return Link("measured", alpha, 1.0 / beta)
