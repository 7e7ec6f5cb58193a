"""Pure helpers of bench/peers/run.py (no processes, no TensorFlow), so that
tests/python/test_peers_bench.py can check them."""

import json
import socket
import statistics
from dataclasses import dataclass, field


@dataclass
class Config:
    """One configuration of a table: `stack` names the TensorFlow under it
    (a row's speed-ups are over the 1-process rows of its own stack), `cores`
    what its ranks use together, `alone` marks a 1-process baseline."""
    label: str
    n: int
    stack: str
    cores: int
    threads: int  # per rank
    alone: bool = False
    launch: object = None
    runs: list = field(default_factory=list)
    error: str = None


def tf_config(addresses, index):
    """TF_CONFIG of worker `index` of a MultiWorkerMirroredStrategy cluster."""
    return json.dumps({"cluster": {"worker": list(addresses)},
                       "task": {"type": "worker", "index": index}})


def free_ports(count):
    """`count` TCP ports free on this host's loopback a moment ago."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def choices(text, allowed, option):
    """The comma-separated values of an option, each checked against `allowed`
    (None: anything), no value twice; ValueError names the option."""
    values = [v.strip() for v in text.split(",")]
    if not values or any(not v for v in values):
        raise ValueError(f"{option} {text!r}: expected a comma-separated list")
    if len(set(values)) != len(values):
        raise ValueError(f"{option} {text!r}: a value given twice")
    if allowed is not None:
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ValueError(f"{option}: unknown {', '.join(bad)} (choose from "
                             f"{', '.join(sorted(allowed))})")
    return values


def numbers(text, kind, option):
    """The positive numbers of a comma-separated option; ValueError names it."""
    values = []
    for v in choices(text, None, option):
        try:
            values.append(kind(v))
        except ValueError:
            raise ValueError(f"{option}: {v!r} is not a number") from None
        if values[-1] <= 0:
            raise ValueError(f"{option}: {v} must be positive")
    return values


def samples_per_s(runs):
    """Samples/s of one configuration: the global batch over the median of the
    runs' mean step times (each the whole timed stretch over its steps, so
    slow steps and waits for a CPU quota count)."""
    return runs[0]["batch"] * 1e3 / statistics.median(r["mean_ms"] for r in runs)


def rows(configs):
    """Table rows [framework, N, threads, samples/s, runs, x 1 thread,
    efficiency per core, x best 1 process, weights vs 1 process] of measured
    Configs."""
    base = {}  # stack -> (1-thread samples/s, best 1-process samples/s, checksum)
    for stack in {c.stack for c in configs}:
        alone = [c for c in configs if c.stack == stack and c.alone and c.runs]
        single = [c for c in alone if c.threads == 1]
        base[stack] = (samples_per_s(single[0].runs) if single else None,
                       max(samples_per_s(c.runs) for c in alone) if alone else None,
                       single[0].runs[0]["checksum"] if single else None)
    out = []
    for c in configs:
        head = [c.label, str(c.n), str(c.threads)]
        if not c.runs:
            status = "skipped" if (c.error or "").startswith("skipped") else "failed"
            out.append(head + [status, c.error or "not run", "-", "-", "-", "-"])
            continue
        speed = samples_per_s(c.runs)
        single, best, checksum = base[c.stack]
        runs = ", ".join(f"{r['mean_ms']:.1f}" for r in c.runs)
        if c.error:
            runs += f" (then failed: {c.error})"
        diff = abs(c.runs[0]["checksum"] - checksum) / abs(checksum) if checksum else None
        out.append(head + [f"{speed:.1f}", runs,
                           f"{speed / single:.2f}" if single else "-",
                           f"{speed / single / c.cores:.0%}" if single else "-",
                           f"{speed / best:.2f}" if best else "-",
                           "-" if diff is None else ("same" if diff == 0 else f"{diff:.0e}")])
    return out
