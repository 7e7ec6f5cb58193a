"""Runs bench/step_job.py (alone or under a launcher) and returns its median
step time in ms; shared by bench/threads/run.py and bench/messages/run.py."""

import os
import re
import subprocess
import sys

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_job.py")


def job_command(model, steps):
    return [sys.executable, JOB, model, "--steps", str(steps)]


def step_ms(cmd, env, timeout=900):
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env}
    r = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)
    m = re.search(r"STEP_MS ([0-9.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return float(m.group(1))
