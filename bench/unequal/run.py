"""Unequal hosts: the Infrastructure-Aware TensorFlow experiment, and a host that
becomes busy mid-run. One command, one run, on emulated hosts (tests/cluster;
needs root):

    python bench/unequal/run.py [--steps 40] [--batch 1536] [--docs docs]
                                [--batch-mode per-rank]

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
    steps, batch = args.steps, args.batch
    if args.batch_mode == "per-rank":  # the same steps of `batch` samples, dealt as np_ batches
        cmd += ["--batch-mode", "per-rank"]
        steps, batch = steps * np_, batch // np_
    cmd += [sys.executable, JOB, out, str(steps), str(batch)]
    for stale in (out, out + ".progress", out + ".shares"):  # from an earlier run in this --work
        if os.path.exists(stale):
            os.remove(stale)
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
    args = argparse.Namespace(**{**vars(args), "steps": args.dynamic_steps})
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


def _image(what, args):
    """unequal-<what>.png; unequal-per-rank-<what>.png for per-rank batch mode."""
    mode = "per-rank-" if getattr(args, "batch_mode", "global") == "per-rank" else ""
    return f"unequal-{mode}{what}.png"


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
    fig.savefig(os.path.join(img, _image("step-times", args)), dpi=90)

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, run, title in ((a, static["aware"], "aware placement (hosts 0, 2, 3, 4)"),
                           (b, dynamic["adaptive"], "host 1 loaded half-way")):
        log = run["shares"]
        calls = [0] + [h["call"] for h in log["history"]] + [len(run["steps"])]
        fractions = [log["initial"]] + [h["fractions"] for h in log["history"]]
        fractions.append(fractions[-1])
        for r in range(log["size"]):
            ax.step(calls, [f[r] for f in fractions], where="post", label=f"rank {r}")
        ax.set(title=title, xlabel="step", ylabel="share of each batch", ylim=(0, 0.5))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(img, _image("shares", args)), dpi=90)


def report(static, dynamic, args):
    """The tables. Time to finish is the job's wall time (tfmpirun start to exit:
    start-up, aware placement's probing, every step); the steady figures leave
    out step 1, which traces and waits for the slowest host to import TensorFlow."""
    d, a = static["default"], static["aware"]
    steady = lambda run: sum(run["steps"][1:])  # noqa: E731
    bound = static["bound"] * (args.steps - 1) / args.steps
    print(f"\nbatch mode: {getattr(args, 'batch_mode', 'global')}")
    print(f"\n| static, {args.steps} steps of {args.batch} | job (s) | steps 2-{args.steps} (s) "
          f"| mean step (s) | steps vs default |")
    print("|---|---|---|---|---|")
    print(f"| default placement, equal shares | {d['wall']:.1f} | {steady(d):.1f} | "
          f"{steady(d) / (args.steps - 1):.3f} | 1.00 |")
    print(f"| aware placement, adaptive shares | {a['wall']:.1f} | {steady(a):.1f} | "
          f"{steady(a) / (args.steps - 1):.3f} | {steady(a) / steady(d):.2f} |")
    print(f"| capacity bound of the aware hosts | | {bound:.1f} | {bound / (args.steps - 1):.3f} | "
          f"{bound / steady(d):.2f} |")
    print(f"\ntime to finish: {100 * (1 - a['wall'] / d['wall']):.0f}% less (job), "
          f"{100 * (1 - steady(a) / steady(d)):.0f}% less (steps 2-{args.steps}); the aware run's "
          f"steps took {steady(a) / bound:.2f}x the capacity bound")
    eq, ad = dynamic["equal"], dynamic["adaptive"]
    before = lambda run: statistics.mean(run["steps"][1:run["changed_at"]])  # noqa: E731
    n = len(ad["steps"])
    load = ad["changed_at"]
    tail = lambda run: statistics.median(run["steps"][-n // 4:])  # noqa: E731
    print(f"\n| dynamic, {n} steps, host 1 loaded after step {load} | job (s) | mean step before (s) "
          f"| median step after (s) | median step, last quarter (s) |")
    print("|---|---|---|---|---|")
    for name, run in (("equal shares", eq), ("adaptive shares", ad)):
        after = statistics.median(run["steps"][load + 1:])
        print(f"| {name} | {run['wall']:.1f} | {before(run):.3f} | {after:.3f} | {tail(run):.3f} |")
    settled = tail(ad)
    back = next((k for k in range(load, n - 4)
                 if statistics.median(ad["steps"][k:k + 5]) <= 1.15 * settled), None)
    moved = [h["call"] for h in ad["shares"]["history"] if h["call"] > load and h["changed"]]
    print(f"\nadaptive: shares first moved at step {moved[0] if moved else '-'}; the 5-step median "
          f"was within 15% of the last quarter's ({settled:.3f} s) from step {back} on, "
          f"{'-' if back is None else back - load} steps after the load started")
    print("\naware placement printed:\n" + "\n".join(
        line for line in static["placement_output"] if not line.startswith(("WARNING", "I0000"))))


def load_results(work):
    saved = json.load(open(os.path.join(work, "results.json")))
    static = dict(saved["static"], default=saved["runs"]["default"], aware=saved["runs"]["aware"])
    dynamic = {s: saved["runs"][f"dynamic-{s}"] for s in ("equal", "adaptive")}
    return static, dynamic


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=1536)
    p.add_argument("--dynamic-steps", type=int, default=80,
                   help="steps of the dynamic case (the load starts half-way)")
    p.add_argument("--batch-mode", choices=["global", "per-rank"], default="global",
                   help="per-rank: each step's batch is 4 per-rank batches of a quarter, dealt "
                        "by speed with adaptive shares (docs/transparent.md, \"Per-rank batches\")")
    p.add_argument("--docs", default=os.path.join(HERE, "..", "..", "docs"))
    p.add_argument("--work", default=None, help="folder for the runs' files (default: a temp folder)")
    p.add_argument("--only", choices=["dynamic"],
                   help="run the dynamic case only, keeping the static one in <work>/results.json")
    p.add_argument("--report-only", action="store_true",
                   help="print the tables and draw the plots again from <work>/results.json")
    args = p.parse_args()
    if args.batch_mode == "per-rank" and args.batch % 4:
        p.error("--batch-mode per-rank needs a --batch that is a multiple of 4 (4 ranks' batches)")
    try:
        import matplotlib  # noqa: F401  (the plots; checked before minutes of runs)
    except ImportError:
        raise SystemExit("bench: the plots need matplotlib: python -m pip install matplotlib")
    if args.report_only:
        static, dynamic = load_results(args.work)
        saved = json.load(open(os.path.join(args.work, "results.json"))).get("args", {})
        args.steps, args.batch = saved.get("steps", args.steps), saved.get("batch", args.batch)
        args.batch_mode = saved.get("batch_mode", "global")
        report(static, dynamic, args)
        plot(static, dynamic, args, os.path.join(args.docs, "img"))
        return
    reason = harness.unavailable_reason()
    if reason:
        raise SystemExit(f"bench: emulated cluster unavailable: {reason}")
    import tempfile
    work = args.work or tempfile.mkdtemp(prefix="tfmpi-unequal-")
    os.makedirs(work, exist_ok=True)
    if args.only == "dynamic":  # the static case from an earlier run in the same --work
        static, _ = load_results(work)
    else:
        static = static_case(args, work)
    dynamic = dynamic_case(args, work)
    json.dump({"args": {"steps": args.steps, "batch": args.batch, "dynamic_steps": args.dynamic_steps,
                        "batch_mode": args.batch_mode},
               "static": {k: v for k, v in static.items() if k not in ("default", "aware")},
               "runs": {n: {k: v for k, v in r.items() if k != "output"}
                        for n, r in [("default", static["default"]), ("aware", static["aware"]),
                                     *[(f"dynamic-{s}", r) for s, r in dynamic.items()]]}},
              open(os.path.join(work, "results.json"), "w"))
    report(static, dynamic, args)
    plot(static, dynamic, args, os.path.join(args.docs, "img"))
    print(f"\nruns and results.json in {work}")


if __name__ == "__main__":
    main()
