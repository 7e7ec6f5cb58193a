"""Unequal hosts: the Infrastructure-Aware TensorFlow experiment, and a host that
becomes busy mid-run. One command, one run, on emulated hosts (tests/cluster;
needs root):

    python bench/unequal/run.py [--steps 40] [--batch 1536] [--docs docs]

Static case: a pool of 5 hosts of which the job wants 4; host 1 has 25% of a
full host's CPU, host 3 50%, host 4 is a full spare. Default placement (the
first 4 slots of the hostfile) with equal shares, vs `--placement aware`
(leaves host 1 out) with adaptive shares. The capacity bound is the time the
chosen hosts would need if every batch were split exactly by their speeds,
each measured alone (the same job as one process on that host). Dynamic case:
4 full hosts; half-way, host 1 gets a busy loop; equal shares vs adaptive.
A full host is 40% of one core (the machine has 2 cores for 5 hosts), so only
ratios mean anything. Writes the table to stdout and <docs>/img/unequal-*.png.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))

import harness  # noqa: E402

JOB = os.path.join(HERE, "job.py")
FULL = 0.4  # CPU of a full host, in cores
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}


def step_times(ends):
    return [b - a for a, b in zip([0.0] + ends[:-1], ends)]


def launch(cluster, np_, out, args, placement=None, shares="adaptive", when_half=None,
           timeout=900):
    """One tfmpirun of the job; calls when_half() once rank 0 is half-way."""
    env = {**os.environ, **QUIET, "TFMPI_SHARES": shares, "TFMPI_SHARES_LOG": out + ".shares"}
    cmd = ["tfmpirun", "-np", str(np_), *cluster.tfmpirun_args()]
    if placement:
        cmd += ["--placement", placement]
    cmd += [sys.executable, JOB, out, str(args.steps), str(args.batch)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    changed_at = None
    if when_half is not None:
        while proc.poll() is None and changed_at is None:
            try:
                done = int(open(out + ".progress").read() or 0)
            except (OSError, ValueError):
                done = 0
            if done >= args.steps // 2:
                when_half()
                changed_at = done
            time.sleep(0.05)
    text, _ = proc.communicate(timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{text[-3000:]}")
    result = json.load(open(out))
    shares = json.load(open(out + ".shares")) if os.path.exists(out + ".shares") else None
    return {"wall": wall, "steps": step_times(result["step_ends"]), "fit": result["step_ends"][-1],
            "shares": shares, "output": text, "changed_at": changed_at}


def solo_speed(cluster, host, args, work):
    """Samples per second of the job as one process on `host`, at a quarter of the
    batch, over whole seconds: a CPU quota lets a short burst run at full speed, so
    single steps say nothing."""
    out = os.path.join(work, f"solo-{host}.json")
    steps, batch = 16, args.batch // 4
    cmd = (f"TF_CPP_MIN_LOG_LEVEL=3 {sys.executable} {JOB} {out} {steps} {batch}")
    r = cluster.run(host, cmd, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"bench: solo run on host {host} failed:\n{r.stdout}{r.stderr}")
    ends = json.load(open(out))["step_ends"]
    return batch * (steps - 2) / (ends[-1] - ends[1])  # the first steps trace


def recovery_steps(steps, changed_at, steady, within=1.15):
    """Steps after the change until a 3-step median is within `within` of `steady`."""
    for k in range(changed_at, len(steps) - 2):
        if statistics.median(steps[k:k + 3]) <= within * steady:
            return k - changed_at
    return None


def static_case(args, work):
    quotas = [FULL, 0.25 * FULL, FULL, 0.5 * FULL, FULL]
    with harness.EmulatedCluster(hosts=5, cpu_quota=quotas, slots=1) as cluster:
        speeds = [solo_speed(cluster, h, args, work) for h in range(5)]
        print("solo speeds (samples/s):", ", ".join(f"host {h}: {s:.0f}" for h, s in enumerate(speeds)),
              flush=True)
        default = launch(cluster, 4, os.path.join(work, "default.json"), args, shares="equal")
        aware = launch(cluster, 4, os.path.join(work, "aware.json"), args, placement="aware")
    chosen = [0, 2, 3, 4]  # what aware placement should pick: all but the 25% host
    picked = [line for line in aware["output"].splitlines() if line.strip()]
    bound = args.steps * args.batch / sum(speeds[h] for h in chosen)
    bound_default = args.steps * args.batch / sum(speeds[h] for h in range(4))
    return {"speeds": speeds, "default": default, "aware": aware, "bound": bound,
            "bound_default": bound_default, "placement_output": picked}


def dynamic_case(args, work):
    runs = {}
    with harness.EmulatedCluster(hosts=4, cpu_quota=FULL, slots=1) as cluster:
        for shares in ("equal", "adaptive"):
            out = os.path.join(work, f"dynamic-{shares}.json")

            def load():
                cluster.start_load(1, procs=1)

            try:
                runs[shares] = launch(cluster, 4, out, args, shares=shares, when_half=load)
            finally:
                cluster.stop_load(1)
    return runs


def plot(static, dynamic, args, img):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(img, exist_ok=True)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(static["default"]["steps"][1:], label="default placement, equal shares")
    a.plot(static["aware"]["steps"][1:], label="aware placement, adaptive shares")
    a.axhline(static["bound"] / args.steps, ls=":", c="k", label="capacity bound")
    a.set(title="5-host pool, 4 wanted", xlabel="step", ylabel="step time (s)")
    for shares, run in dynamic.items():
        b.plot(run["steps"][1:], label=f"{shares} shares")
    b.axvline(dynamic["adaptive"]["changed_at"], ls=":", c="k", label="host 1 loaded")
    b.set(title="A host becomes busy half-way", xlabel="step", ylabel="step time (s)")
    for ax in (a, b):
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "unequal-step-times.png"), dpi=90)

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, run, title in ((a, static["aware"], "aware placement (hosts 0, 2, 3, 4)"),
                           (b, dynamic["adaptive"], "host 1 loaded half-way")):
        log = run["shares"]
        calls = [0] + [h["call"] for h in log["history"]] + [args.steps]
        fractions = [log["initial"]] + [h["fractions"] for h in log["history"]]
        fractions.append(fractions[-1])
        for r in range(log["size"]):
            ax.step(calls, [f[r] for f in fractions], where="post", label=f"rank {r}")
        ax.set(title=title, xlabel="step", ylabel="share of each batch", ylim=(0, 0.5))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "unequal-shares.png"), dpi=90)


def report(static, dynamic, args):
    d, a = static["default"], static["aware"]
    print(f"\n| static, {args.steps} steps of {args.batch} | time (s) | step (s) | vs default |")
    print("|---|---|---|---|")
    mean = lambda run: statistics.mean(run["steps"][1:])  # noqa: E731
    print(f"| default placement, equal shares | {d['fit']:.1f} | {mean(d):.3f} | 1.00 |")
    print(f"| aware placement, adaptive shares | {a['fit']:.1f} | {mean(a):.3f} | "
          f"{a['fit'] / d['fit']:.2f} ({100 * (1 - a['fit'] / d['fit']):.0f}% less time) |")
    print(f"| capacity bound of the aware hosts | {static['bound']:.1f} | "
          f"{static['bound'] / args.steps:.3f} | aware run at {a['fit'] / static['bound']:.2f}x the bound |")
    print(f"| capacity bound of the default hosts | {static['bound_default']:.1f} | "
          f"{static['bound_default'] / args.steps:.3f} | |")
    eq, ad = dynamic["equal"], dynamic["adaptive"]
    half = lambda run: statistics.mean(run["steps"][run["changed_at"] + 1:])  # noqa: E731
    before = lambda run: statistics.mean(run["steps"][1:run["changed_at"]])  # noqa: E731
    steady = statistics.median(ad["steps"][-max(5, args.steps // 5):])
    rec = recovery_steps(ad["steps"], ad["changed_at"], steady)
    rec = "never" if rec is None else f"{rec} steps"
    print(f"\n| dynamic, host 1 loaded at step ~{ad['changed_at']} | time (s) | step before (s) "
          f"| step after (s) |")
    print("|---|---|---|---|")
    print(f"| equal shares | {eq['fit']:.1f} | {before(eq):.3f} | {half(eq):.3f} |")
    print(f"| adaptive shares | {ad['fit']:.1f} | {before(ad):.3f} | {half(ad):.3f} |")
    print(f"\nadaptive: back within 15% of its new steady step time ({steady:.3f} s) "
          f"{rec} after the load started")
    print("aware placement printed:\n" + "\n".join(static["placement_output"][:40]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=1536)
    p.add_argument("--docs", default=os.path.join(HERE, "..", "..", "docs"))
    p.add_argument("--work", default=None, help="folder for the runs' files (default: a temp folder)")
    args = p.parse_args()
    reason = harness.unavailable_reason()
    if reason:
        raise SystemExit(f"bench: emulated cluster unavailable: {reason}")
    import tempfile
    work = args.work or tempfile.mkdtemp(prefix="tfmpi-unequal-")
    os.makedirs(work, exist_ok=True)
    static = static_case(args, work)
    dynamic = dynamic_case(args, work)
    report(static, dynamic, args)
    plot(static, dynamic, args, os.path.join(args.docs, "img"))
    json.dump({"static": {k: v for k, v in static.items() if k not in ("default", "aware")},
               "runs": {n: {k: v for k, v in r.items() if k != "output"}
                        for n, r in [("default", static["default"]), ("aware", static["aware"]),
                                     *[(f"dynamic-{s}", r) for s, r in dynamic.items()]]}},
              open(os.path.join(work, "results.json"), "w"))
    print(f"\nruns and results.json in {work}")


if __name__ == "__main__":
    main()
