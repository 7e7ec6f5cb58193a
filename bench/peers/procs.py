"""Starting and stopping the jobs of bench/peers/run.py: output to temporary
files (a pipe nobody reads while the job runs would fill and stop it), every
job in its own session so that stopping it reaches mpirun and the ranks
behind a launcher, and the failing process named, not the ones stopped
after it."""

import os
import signal
import subprocess
import tempfile
import time

GRACE_S = 15  # tfmpirun and mpirun end their ranks within this after SIGTERM


class JobFailed(RuntimeError):
    pass


def spawn(argv, env=None):
    out = tempfile.TemporaryFile("w+", errors="replace")
    err = tempfile.TemporaryFile("w+", errors="replace")
    try:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True,
                                start_new_session=True)
    except OSError as e:
        out.close()
        err.close()
        raise JobFailed(f"cannot start {argv[0]}: {e}") from None
    proc.files = (out, err)
    return proc


def stop(procs):
    """SIGTERM to each running job's process group, SIGKILL after GRACE_S."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while any(p.poll() is None for p in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in running:
        _signal_group(p, signal.SIGKILL)
        p.wait()


def _signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def output(proc):
    """(stdout, stderr) of a finished job."""
    texts = []
    for f in proc.files:
        f.seek(0)
        texts.append(f.read())
        f.close()
    return tuple(texts)


def wait_all(launch, what, timeout):
    """Starts the processes launch() returns and waits for all of them; once
    one fails or time runs out, the others are stopped and JobFailed tells
    which failed, with its output. Their standard outputs, joined."""
    procs = []
    try:
        procs = launch()
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]  # every one, not any()'s first few
            failed = [i for i, code in enumerate(codes) if code not in (None, 0)]
            running = None in codes
            if failed or not running or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        timed_out = running and not failed
    finally:
        stop(procs)
    texts = [output(p) for p in procs]
    if failed or timed_out:
        i = failed[0] if failed else 0
        out, err = texts[i]
        why = (f"process {i} of {len(procs)} exited with {procs[i].returncode}" if failed
               else f"still running after {timeout} s")
        raise JobFailed(f"{what}: {why}\n{out[-1500:]}\n{err[-3000:]}")
    return "\n".join(out for out, _ in texts)


def last_line(text):
    """The last non-empty line of an error (for a table cell: no '|')."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "?").replace("|", "/")[:160]
