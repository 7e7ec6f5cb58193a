"""tfmpi next to its peers (docs/peers.md): the same model, synthetic data,
global batch and steps (bench/peers/job.py) as one process, under tfmpi, under
TensorFlow's MultiWorkerMirroredStrategy and under Horovod 0.28.1, at N ranks
on this host and, with --hosts, at 2 ranks across two emulated hosts of one
core each, per link speed. One command, one run; every configuration runs
--rounds times, interleaved. Prints Markdown tables: samples/s (the global
batch over the median of the runs' mean step times), the speed-up over one
process with one thread, that speed-up per core the ranks use (scaling
efficiency), and the ratio to the best one-process configuration (all cores).

Thread pools: every process of every framework gets the same
TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS, its host's cores split over
the ranks on that host (at least 1), which is what tfmpi gives its ranks.

Horovod runs from a cached environment with TensorFlow 2.15
(bench/peers/horovod_env.sh builds it once, a few minutes); its rows are
compared with one process on that same stack. Without the environment the
Horovod rows say so and the rest runs.

    python bench/peers/run.py [--models mlp42m,resnet50] [--ranks 1,2,4]
        [--frameworks tfmpi,mwms,horovod] [--rounds 3] [--hosts [--links 1000,10000]]
        [--horovod-env DIR]
"""

import argparse
import json
import os
import re
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "job.py")
sys.path.insert(0, HERE)
import peers  # noqa: E402
from peers import Config  # noqa: E402
from procs import JobFailed, last_line, spawn, stop, wait_all  # noqa: E402

DEFAULT_HOROVOD_ENV = os.path.join(
    os.environ.get("TFMPI_PEERS_CACHE", os.path.join(os.path.expanduser("~"), ".cache",
                                                     "tfmpi-peers")), "horovod")
# model: (timed steps, warm-up steps, timeout of one run in seconds)
STEPS = {"mlp42m": (25, 5, 900), "resnet50": (8, 3, 1200), "tiny": (40, 5, 240)}
TF_NEW, TF_215 = "TensorFlow 2.21, Keras 3", "TensorFlow 2.15, tf.keras"
TF_KERAS, LEGACY = "TensorFlow 2.21, tf_keras", {"TF_USE_LEGACY_KERAS": "1"}
FRAMEWORKS = ("tfmpi", "tfmpi-tf.keras", "mwms", "horovod")
HOROVOD = "Horovod 0.28.1"


def threads_env(cores, ranks_here):
    n = str(max(1, cores // ranks_here))
    return {"TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": n, "OMP_NUM_THREADS": n,
            "TF_CPP_MIN_LOG_LEVEL": "2"}


def usable_cores():
    """This host's cores as tfmpi counts them: affinity mask, capped by a cgroup quota."""
    from tfmpi import _core
    return _core.thread_plan(0, 1, False)["cores"]


class OneHost:
    """Launches jobs on this host."""

    def __init__(self, cores):
        self.cores, self.hosts = cores, 1
        self.describe = f"one host, {cores} cores"

    def alone(self, args, threads, extra=None):
        return [spawn(args, {**os.environ, **threads_env(threads, 1), **(extra or {})})]

    def tfmpirun(self, n, args, extra=None):
        return [spawn(["tfmpirun", "-np", str(n), *args],
                      {**os.environ, **threads_env(self.cores, n), **(extra or {})})]

    def mpirun(self, n, args):
        env = threads_env(self.cores, n)
        # as tfmpirun runs mpirun (launcher/mpirun_command.cc)
        cmd = ["mpirun", "-np", str(n), "--bind-to", "none", "--map-by", "slot"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if n > self.cores:
            cmd += ["--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
        for name in env:
            cmd += ["-x", name]
        return [spawn(cmd + args, {**os.environ, **env})]

    def workers(self, n, args):
        ports = peers.free_ports(n)
        addresses = [f"localhost:{p}" for p in ports]
        procs = []
        try:
            for i in range(n):
                procs.append(spawn(args, {**os.environ, **threads_env(self.cores, n),
                                          "TF_CONFIG": peers.tf_config(addresses, i)}))
        except JobFailed:
            stop(procs)
            raise
        return procs


class EmulatedHosts:
    """Launches jobs on emulated hosts of one core, one rank per host."""

    def __init__(self, cluster, mbit):
        self.cluster, self.cores, self.hosts = cluster, 1, cluster.count
        self.describe = f"{cluster.count} emulated hosts of 1 core, TCP, {mbit:g} Mbit/s links"

    def _on(self, host, args, env):
        # the agent starts a clean environment, as ssh does
        line = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *args])
        return spawn(self.cluster.command(host, line))

    def alone(self, args, threads, extra=None):
        return [self._on(0, args, {**threads_env(1, 1), **(extra or {})})]

    def tfmpirun(self, n, args, extra=None):
        # tfmpirun forwards the environment to every rank
        return [spawn(["tfmpirun", "-np", str(n), *self.cluster.tfmpirun_args(), *args],
                      {**os.environ, **threads_env(1, 1), **(extra or {})})]

    def mpirun(self, n, args):
        env = threads_env(1, 1)
        cmd = ["mpirun", "-np", str(n), *self.cluster.mpirun_args(n)]
        for name in env:
            cmd += ["-x", name]
        return [spawn(cmd + args, {**os.environ, **env})]

    def workers(self, n, args):
        port = 23000 + os.getpid() % 5000  # every host has its own network namespace
        addresses = [f"{h.address}:{port}" for h in self.cluster.hosts[:n]]
        return [self._on(i, args, {**threads_env(1, 1),
                                   "TF_CONFIG": peers.tf_config(addresses, i)})
                for i in range(n)]


def job_args(python, framework, model):
    timed, warmup, _ = STEPS[model]
    return [python, JOB, framework, model, "--steps", str(timed + warmup + 1),
            "--warmup", str(warmup)]


def configurations(where, model, ranks, frameworks, horovod_python):
    """The table's Configs, 1-process baselines first."""
    py, cores = sys.executable, where.cores
    share = (lambda n: max(1, cores // n)) if where.hosts == 1 else (lambda n: 1)
    used = (lambda n: min(n * share(n), cores)) if where.hosts == 1 else (lambda n: n)

    def baselines(python, framework, stack, suffix="", extra=None):
        out = [Config(f"1 process, 1 thread{suffix}", 1, stack, 1, 1, alone=True,
                      launch=lambda: where.alone(job_args(python, framework, model), 1, extra))]
        if cores > 1:
            out.append(Config(f"1 process, {cores} threads{suffix}", 1, stack, cores, cores,
                              alone=True, launch=lambda: where.alone(
                                  job_args(python, framework, model), cores, extra)))
        return out

    configs = baselines(py, "plain", TF_NEW)
    with_horovod = "horovod" in frameworks and horovod_python
    if "tfmpi-tf.keras" in frameworks:
        configs += baselines(py, "plain-tf.keras", TF_KERAS, " (tf_keras)", LEGACY)
    if with_horovod:
        configs += baselines(horovod_python, "plain-tf2.15", TF_215, " (TF 2.15)")
    for n in ranks:
        if "tfmpi" in frameworks:
            configs.append(Config("tfmpi", n, TF_NEW, used(n), share(n), launch=lambda n=n:
                                  where.tfmpirun(n, job_args(py, "tfmpi", model))))
        if "tfmpi-tf.keras" in frameworks:
            configs.append(Config("tfmpi (tf_keras)", n, TF_KERAS, used(n), share(n),
                                  launch=lambda n=n: where.tfmpirun(
                                      n, job_args(py, "tfmpi-tf.keras", model), LEGACY)))
        if "mwms" in frameworks:
            configs.append(Config("MultiWorkerMirrored", n, TF_NEW, used(n), share(n),
                                  launch=lambda n=n: where.workers(
                                      n, job_args(py, "mwms", model))))
        if "horovod" in frameworks:
            configs.append(Config(f"{HOROVOD} (TF 2.15)", n, TF_215, used(n), share(n),
                                  launch=lambda n=n: where.mpirun(
                                      n, job_args(horovod_python, "horovod", model)),
                                  error=None if with_horovod else "skipped: no environment"))
    return configs


def result_of(text, what):
    m = re.search(r"^PEERS_RESULT (.*)$", text, re.M)
    if not m:
        raise JobFailed(f"{what}: finished without a result line")
    return json.loads(m.group(1))


def measure(configs, rounds, what, timeout):
    """Runs every Config once per round; a configuration that fails keeps the
    runs it had and is not run again (the error goes to stderr in full)."""
    for r in range(rounds):
        for c in configs:
            if c.error:
                continue
            name = f"{c.label} N={c.n}"
            try:
                c.runs.append(result_of(wait_all(c.launch, name, timeout), name))
                line = f"{c.runs[-1]['mean_ms']:.1f} ms/step"
            except JobFailed as e:
                c.error = last_line(str(e))
                line = f"failed:\n{e}"
            print(f"[{what}] round {r + 1}/{rounds}: {name}: {line}", file=sys.stderr, flush=True)


def table(model, where, configs, rounds):
    batch = next((c.runs[0]["batch"] for c in configs if c.runs), "-")
    print(f"### {model}, {where.describe}\n")
    print(f"Global batch {batch}, {rounds} runs per configuration. Speed-ups are over the "
          "1-process rows of the same stack (TensorFlow and Keras); efficiency is the "
          "speed-up over 1 thread per core used; weights: relative difference of the final "
          "weights' checksum from 1 process, 1 thread of the same stack.\n")
    print("| framework | N | threads per rank | samples/s | runs (mean ms/step) | x 1 thread | "
          "efficiency | x best 1 process | weights |\n|---|---|---|---|---|---|---|---|---|")
    for row in peers.rows(configs):
        print("| " + " | ".join(row) + " |")
    print(flush=True)


def horovod_python(args):
    if "horovod" not in args.frameworks:
        return None
    if not os.path.exists(os.path.join(args.horovod_env, ".complete")):
        print(f"Horovod: skipped, no environment in {args.horovod_env} (build it once with "
              "`bash bench/peers/horovod_env.sh`, a few minutes)\n", flush=True)
        return None
    return os.path.join(args.horovod_env, "bin", "python")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp42m,resnet50")
    parser.add_argument("--ranks", default="1,2,4", help="N on this host")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="tfmpi-tf.keras: tfmpi on the tf.keras script of Horovod's job, "
                             "with tf_keras (TF_USE_LEGACY_KERAS=1)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hosts", action="store_true",
                        help="also N=2 across two emulated hosts of one core (needs root)")
    parser.add_argument("--links", help="with --hosts: Mbit/s per link (default 1000,10000)")
    parser.add_argument("--horovod-env", default=DEFAULT_HOROVOD_ENV)
    args = parser.parse_args(argv)
    if args.links and not args.hosts:
        parser.error("--links needs --hosts")
    try:
        args.models = peers.choices(args.models, STEPS, "--models")
        args.frameworks = peers.choices(args.frameworks, FRAMEWORKS, "--frameworks")
        args.ranks = peers.numbers(args.ranks, int, "--ranks")
        args.links = peers.numbers(args.links or "1000,10000", float, "--links")
    except ValueError as e:
        parser.error(str(e))
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be at least 1")
    return args


def main():
    args = parse()
    harness = None
    if args.hosts:
        sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))
        import harness
        reason = harness.unavailable_reason() or harness.bandwidth_unavailable_reason()
        if reason:
            raise SystemExit(f"--hosts: emulated hosts unavailable here: {reason}")
    hvd = horovod_python(args)
    where = OneHost(usable_cores())
    for model in args.models:
        configs = configurations(where, model, args.ranks, args.frameworks, hvd)
        measure(configs, args.rounds, model, STEPS[model][2])
        table(model, where, configs, args.rounds)
    for mbit in args.links if harness else []:
        with harness.EmulatedCluster(hosts=2, cpu_quota=1.0, bandwidth_mbit=mbit) as cluster:
            hosts = EmulatedHosts(cluster, mbit)
            for model in args.models:
                configs = configurations(hosts, model, [2], args.frameworks, hvd)
                measure(configs, args.rounds, f"{model}, {mbit:g} Mbit/s", STEPS[model][2])
                table(model, hosts, configs, args.rounds)


if __name__ == "__main__":
    main()
