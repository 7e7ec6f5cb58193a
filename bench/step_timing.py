"""Runs bench/step_job.py (alone or under a launcher) and returns its median
step time in ms; runs configurations interleaved over rounds; shared by the
step benchmarks (bench/threads, bench/messages, bench/hosts, fixed_cost.py)."""

import os
import re
import statistics
import subprocess
import sys

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_job.py")


def job_command(model, steps):
    return [sys.executable, JOB, model, "--steps", str(steps)]


def step_ms(cmd, env, timeout=900, statistic="STEP_MS"):
    """The job's median step time, or with statistic="STEP_MEAN_MS" its mean."""
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env}
    r = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)
    m = re.search(rf"^{statistic} ([0-9.]+)", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return float(m.group(1))


def baseline_env(folder):
    """The environment that runs another build of the tfmpi package, held in
    `folder`, ahead of the installed one."""
    if not os.path.isdir(os.path.join(folder, "tfmpi")):
        raise SystemExit(f"--baseline {folder}: no tfmpi package in that folder")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [os.path.abspath(folder),
                                                        os.environ.get("PYTHONPATH")]))}


def env_settings(parser, values):
    """[(text, {name: value})] of --env values "NAME=VALUE[,NAME=VALUE...]";
    a malformed one is a usage error of `parser`."""
    settings = []
    for text in values:
        pairs = [p.split("=", 1) for p in text.split(",")]
        if any(len(p) != 2 or not p[0] for p in pairs):
            parser.error(f"--env {text!r}: expected NAME=VALUE[,NAME=VALUE...]")
        if any(text == seen for seen, _ in settings):
            parser.error(f"--env {text!r} given twice")
        settings.append((text, dict(pairs)))
    return settings


def interleaved_medians(configs, rounds, digits=2, statistic="STEP_MS"):
    """{label: (median, [ms per run])} of step_ms(cmd, env, statistic=...) for
    each (label, cmd, env) in `configs`, all run once per round, `rounds`
    times; each round is reported on stderr."""
    times = {label: [] for label, _, _ in configs}
    for r in range(rounds):
        for label, cmd, env in configs:
            times[label].append(step_ms(cmd, env, statistic=statistic))
        print(f"round {r + 1}/{rounds}: "
              + ", ".join(f"{label} {times[label][-1]:.{digits}f} ms" for label, _, _ in configs),
              file=sys.stderr, flush=True)
    return {label: (statistics.median(v), v) for label, v in times.items()}
