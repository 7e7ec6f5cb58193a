"""Init/shutdown rules, the parameter registry, and the timeline, each in fresh processes."""

import json
import sys

import pytest

from mpirun_util import run, run_python

SNIPPET_BEFORE_INIT = """
import os
import numpy as np, tfmpi
def print(tag, e):  # one write per line so ranks' lines don't interleave
    os.write(1, f"{tag} {e}\\n".encode())
try:
    tfmpi.allreduce(np.ones(2))
except tfmpi.NotInitializedError as e:
    print("BEFORE:", e)
tfmpi.init()
tfmpi.shutdown()
try:
    tfmpi.allreduce(np.ones(2))
except tfmpi.NotInitializedError as e:
    print("AFTER:", e)
try:
    tfmpi.rank()
except tfmpi.NotInitializedError as e:
    print("RANK:", e)
"""


@pytest.mark.quick
def test_collective_before_init_and_after_shutdown():
    r = run_python(2, ["-c", SNIPPET_BEFORE_INIT], timeout=120)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("BEFORE: tfmpi is not initialised: call tfmpi.init() first") == 2
    assert r.stdout.count("AFTER: tfmpi has been shut down") == 2
    assert r.stdout.count("RANK: tfmpi") == 2


@pytest.mark.quick
def test_invalid_parameter_is_rejected_at_init():
    r = run_python(1, ["-c", "import tfmpi; tfmpi.init()"], timeout=120,
                   env={"TFMPI_CACHE_CAPACITY": "-5"})
    assert r.returncode != 0
    assert "invalid value '-5' for TFMPI_CACHE_CAPACITY: expected an integer in [0, 1048576]" in r.stdout


def test_invalid_autotune_variables_are_refused_at_start_up():
    for name, value, accepted in [
            ("TFMPI_AUTOTUNE", "maybe", "expected one of 1, 0, true, false, yes, no, on, off"),
            ("TFMPI_AUTOTUNE_SECONDS", "0", "expected a number in [1, 86400]")]:
        r = run_python(2, ["-c", "import tfmpi; tfmpi.init()"], timeout=120,
                       env={"TFMPI_AUTOTUNE": "1", name: value})
        assert r.returncode != 0
        assert f"invalid value '{value}' for {name}: {accepted}" in r.stdout, r.stdout
    # Under tfmpirun the refusal comes from the start-up hook: one line per rank, no
    # interpreter crash report.
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", "print('started')"], timeout=120,
            env={"TFMPI_AUTOTUNE": "maybe"})
    assert r.returncode != 0
    assert "invalid value 'maybe' for TFMPI_AUTOTUNE" in r.stdout, r.stdout
    assert "started" not in r.stdout and "Fatal Python error" not in r.stdout, r.stdout
    assert "Traceback" not in r.stdout, r.stdout


SKIP_DATA_SNIPPET = """
import os
import numpy as np, tfmpi
tfmpi.init()
r = tfmpi.rank()
summed = tfmpi.allreduce(np.full(3, r + 1.0), op="sum", name="skip.sum")
root = tfmpi.broadcast(np.full(2, r + 5.0), root=0, name="skip.bcast")
gathered = tfmpi.allgather(np.full(1, r * 1.0), name="skip.gather")
os.write(1, f"RANK {r} SUM {summed.tolist()} BCAST {root.tolist()} GATHER {gathered.tolist()}\\n".encode())
tfmpi.shutdown()
"""


SHARES = "from tfmpi.transparent import state; print(f'SHARES={state.options.shares}', flush=True)"


def test_work_shares_are_equal_on_one_host_unless_probed_or_asked():
    # Note [Shares by default]: TFMPI_SHARES=auto is equal only in global-batch
    # mode on one host without probed speeds; across hosts adaptive
    # (tests/cluster/test_multihost.py).
    from tfmpi.transparent.config import resolve_shares

    assert resolve_shares("auto", "global", 4, 4, False) == "equal"
    assert resolve_shares("auto", "global", 4, 2, False) == "adaptive"
    assert resolve_shares("auto", "global", 4, 4, True) == "adaptive"
    assert resolve_shares("auto", "per-rank", 4, 4, False) == "adaptive"  # alike on one host
    assert resolve_shares("equal", "global", 4, 1, True) == "equal"
    assert resolve_shares("adaptive", "global", 4, 4, False) == "adaptive"
    ignored = "ignoring TFMPI_PROBE_SPEEDS='1,x': expected 2 numbers (one per rank)"
    for env, expected in (({}, "equal"), ({"TFMPI_PROBE_SPEEDS": "1,2"}, "adaptive"),
                          ({"TFMPI_SHARES": "adaptive"}, "adaptive"),
                          ({"TFMPI_BATCH_MODE": "per-rank"}, "adaptive"),
                          # ignored, said once: as if nothing were probed
                          ({"TFMPI_PROBE_SPEEDS": "1,x"}, "equal")):
        r = run(["tfmpirun", "-np", "2", "--all-ranks-output", sys.executable, "-c", SHARES],
                timeout=120, env=env)
        assert r.returncode == 0, r.stdout
        assert r.stdout.count(f"SHARES={expected}") == 2, (env, r.stdout)
        assert r.stdout.count(ignored) == ("x" in env.get("TFMPI_PROBE_SPEEDS", "")), r.stdout


def test_skip_data_negotiates_but_moves_no_allreduce_data():
    # Note [Skipping the data]: a diagnostic for exposed communication.
    r = run_python(2, ["-c", SKIP_DATA_SNIPPET], timeout=120, env={"TFMPI_SKIP_DATA": "1"})
    assert r.returncode == 0, r.stdout
    assert "RANK 0 SUM [1.0, 1.0, 1.0] BCAST [5.0, 5.0] GATHER [0.0, 1.0]" in r.stdout, r.stdout
    assert "RANK 1 SUM [2.0, 2.0, 2.0] BCAST [5.0, 5.0] GATHER [0.0, 1.0]" in r.stdout, r.stdout
    assert "TFMPI_SKIP_DATA is set" in r.stdout
    both = run_python(2, ["-c", "import tfmpi; tfmpi.init()"], timeout=120,
                      env={"TFMPI_SKIP_DATA": "1", "TFMPI_AUTOTUNE": "1"})
    assert both.returncode != 0
    assert "TFMPI_SKIP_DATA and TFMPI_AUTOTUNE cannot be combined" in both.stdout, both.stdout


@pytest.mark.quick
def test_params_table_lists_every_knob():
    r = run([sys.executable, "-m", "tfmpi.params"], timeout=60)
    assert r.returncode == 0, r.stdout
    for name in ["TFMPI_FUSION_THRESHOLD", "TFMPI_CYCLE_TIME_MS", "TFMPI_CACHE_CAPACITY",
                 "TFMPI_TIMELINE", "TFMPI_LOG_LEVEL", "TFMPI_DIRECT_THRESHOLD",
                 "TFMPI_AUTOTUNE", "TFMPI_AUTOTUNE_LOG", "TFMPI_AUTOTUNE_SECONDS"]:
        assert name in r.stdout
    bad = run([sys.executable, "-m", "tfmpi.params", "--check"], timeout=60,
              env={"TFMPI_LOG_LEVEL": "loud"})
    assert bad.returncode == 1 and "TFMPI_LOG_LEVEL" in bad.stdout and "loud" in bad.stdout
    good = run([sys.executable, "-m", "tfmpi.params", "--check"], timeout=60,
               env={"TFMPI_FUSION_THRESHOLD": "16MiB", "TFMPI_SHARES": "equal"})
    assert good.returncode == 0, good.stdout
    # transparent mode's variables are listed too, with their defaults
    for name in ["TFMPI_BATCH_MODE", "TFMPI_SHARES", "TFMPI_SHARDED_UPDATE", "TFMPI_THREADS",
                 "TFMPI_GRADIENT_BUCKET_BYTES", "TFMPI_SYNC_BATCHNORM", "TFMPI_SHARES_VERBOSE",
                 "TFMPI_FUSED_UPDATES"]:
        assert name in r.stdout.split("Transparent mode")[1], r.stdout


@pytest.mark.quick
def test_params_check_covers_transparent_mode_and_misspelt_names():
    """--check validates transparent mode's variables as well as the engine's, and
    refuses a name one slip away from a real one (whose setting would silently not
    apply); a TFMPI_* name near none is only noted."""
    bad = run([sys.executable, "-m", "tfmpi.params", "--check"], timeout=60,
              env={"TFMPI_SHARES": "fastest", "TFMPI_THREADS": "many",
                   "TFMPI_SHARDED_UPDATE": "maybe", "TFMPI_FUSION_THRESHOLD": "lots",
                   "TFMPI_LOG_LEVEL": "loud"})
    assert bad.returncode == 1, bad.stdout
    # every invalid value at once, not only the first, the engine's as well, a line each
    assert "tfmpi: invalid value 'lots' for TFMPI_FUSION_THRESHOLD: expected" in bad.stdout
    assert "tfmpi: invalid value 'loud' for TFMPI_LOG_LEVEL: expected one of" in bad.stdout
    assert "invalid value 'fastest' for TFMPI_SHARES: expected auto, adaptive or equal" in bad.stdout
    assert "invalid value 'many' for TFMPI_THREADS: expected auto or off" in bad.stdout
    assert ("invalid value 'maybe' for TFMPI_SHARDED_UPDATE: expected 1/0, true/false, yes/no, "
            "on/off") in bad.stdout
    typo = run([sys.executable, "-m", "tfmpi.params", "--check"], timeout=60,
               env={"TFMPI_SHARDED_UPDATES": "1", "TFMPI_UNRELATED_THING": "1"})
    assert typo.returncode == 1, typo.stdout
    assert ("TFMPI_SHARDED_UPDATES is not a tfmpi variable and is ignored; did you mean "
            "TFMPI_SHARDED_UPDATE?") in typo.stdout
    assert "TFMPI_UNRELATED_THING is not a tfmpi variable (ignored)" in typo.stdout
    unrelated = run([sys.executable, "-m", "tfmpi.params", "--check"], timeout=60,
                    env={"TFMPI_UNRELATED_THING": "1"})
    assert unrelated.returncode == 0, unrelated.stdout


def test_the_numpy_api_names_a_misspelt_variable_once():
    """Under plain mpirun (no transparent mode) init() is where rank 0 says it, once even
    when init() is called again."""
    code = "import tfmpi; tfmpi.init(); tfmpi.init(); tfmpi.shutdown(); print('done')"
    r = run_python(2, ["-c", code], timeout=120, env={"TFMPI_FUSION_THRESOLD": "1M"})
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("done") == 2, r.stdout
    assert r.stdout.count("TFMPI_FUSION_THRESOLD is not a tfmpi variable") == 1, r.stdout
    assert "did you mean TFMPI_FUSION_THRESHOLD?" in r.stdout, r.stdout


@pytest.mark.quick
def test_every_variable_the_code_reads_is_known():
    """Every TFMPI_* name in the package's and engine's sources is in the engine's
    registry or transparent mode's list (config.VARIABLES), so the misspelling check
    never calls a real variable unknown, and the table leaves none out."""
    import os
    import re

    from tfmpi import variables

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    names = set()
    for folder in ("python", "src"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in files:
                if f.endswith((".py", ".cc", ".h")):
                    with open(os.path.join(dirpath, f), encoding="utf-8") as src:
                        names |= set(re.findall(r"[\"'](TFMPI_[A-Z_]+)[\"']", src.read()))
    not_variables = {"TFMPI_BATCH_MISMATCH"}  # a marker in error messages (batch_check.py)
    assert names - not_variables - variables.known_names() == set()
    assert len(names) > 25, sorted(names)


# The engine starts a cycle as soon as a request arrives, so small tensors
# submitted one after another are fused only if they are pending together at a
# cycle's start: here, while the engine negotiates and reduces a large tensor
# (above the direct threshold: never fused) submitted just before them. Twenty
# rounds, so that a busy machine that delays the submissions in some rounds
# still leaves fused ones (FUSE, COPY_OUT). The thresholds are pinned.
TIMELINE_SNIPPET = """
import numpy as np, tfmpi
tfmpi.init()
for i in range(20):
    hs = [tfmpi.allreduce_async(np.ones(1 << 22, np.float32), op="sum", name="large")]
    hs += [tfmpi.allreduce_async(np.ones(100, np.float32), op="sum", name=f"grad/{j}") for j in range(5)]
    [h.wait() for h in hs]
tfmpi.shutdown()
"""


def test_timeline_is_chrome_trace_json(tmp_path):
    path = tmp_path / "timeline.json"
    r = run_python(2, ["-c", TIMELINE_SNIPPET], timeout=120,
                   env={"TFMPI_TIMELINE": str(path), "TFMPI_DIRECT_THRESHOLD": "1MiB",
                        "TFMPI_FUSION_THRESHOLD": "64MiB", "TFMPI_AUTOTUNE": "0"})
    assert r.returncode == 0, r.stdout
    events = json.loads(path.read_text())
    phases = {e["name"] for e in events if e.get("ph") == "X"}
    assert {"NEGOTIATE", "WAIT", "FUSE", "COLLECTIVE", "COPY_OUT"} <= phases, phases
    rows = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {f"grad/{j}" for j in range(5)} <= rows
    assert all(e["dur"] >= 0 for e in events if e.get("ph") == "X")


def test_log_level_tags_rank():
    r = run_python(2, ["-c", "import tfmpi; tfmpi.init(); tfmpi.shutdown()"], timeout=120,
                   env={"TFMPI_LOG_LEVEL": "info"})
    assert r.returncode == 0, r.stdout
    assert "[tfmpi 0/2 info] engine started" in r.stdout
    assert "[tfmpi 1/2 info] engine started" in r.stdout


EXTRA_COLLECTIVE = """
import os
import numpy as np, tfmpi
tfmpi.init()
tfmpi.allreduce(np.ones(2), name="both")
if tfmpi.rank() == 1:
    try:
        tfmpi.allreduce(np.ones(2), name="only-rank-1")
    except tfmpi.AbortedError as e:
        os.write(1, f"ABORTED {e}\\n".encode())
tfmpi.shutdown()
"""


def test_collective_after_another_rank_finished_fails_instead_of_hanging():
    r = run_python(2, ["-c", EXTRA_COLLECTIVE], timeout=120)
    assert r.returncode == 0, r.stdout
    assert "ABORTED rank 0 has finished (shut tfmpi down) while rank 1 still waits" in r.stdout
    assert "'only-rank-1'" in r.stdout


EXIT_REASON = """
import os, sys, time
import numpy as np, tfmpi

def hook(kind, error, tb):  # what transparent mode does for an uncaught error
    tfmpi.set_exit_reason(f"{kind.__name__}: {error}")
    sys.__excepthook__(kind, error, tb)

sys.excepthook = hook
tfmpi.init()
if tfmpi.rank() == 1:
    time.sleep(0.5)  # rank 0 waits in its allreduce by now
    raise ValueError("bad batch on rank 1")
start = time.monotonic()
try:
    tfmpi.allreduce(np.ones(2), name="never-on-rank-1")
except tfmpi.AbortedError as e:
    os.write(1, f"ABORTED after {time.monotonic() - start:.2f} s: {e}\\n".encode())
"""


def test_rank_that_fails_tells_the_others_why():
    # Rank 1's script raises; at exit it shuts tfmpi down with the error as its
    # exit reason, and rank 0's pending allreduce fails at once naming rank 1 and
    # the error, instead of suggesting different step counts or hanging.
    r = run_python(2, ["-c", EXIT_REASON], timeout=120)
    assert r.returncode != 0, r.stdout
    assert "ValueError: bad batch on rank 1" in r.stdout  # rank 1's traceback
    lines = [line for line in r.stdout.splitlines() if line.startswith("ABORTED")]
    assert len(lines) == 1, r.stdout
    assert ("rank 1 stopped with an error: ValueError: bad batch on rank 1. Rank 0 was still "
            "waiting for 'never-on-rank-1'") in lines[0]
    assert float(lines[0].split()[2]) < 5.0, lines[0]  # ~0.5 s: rank 1 raises after 0.5 s


DIVERGED = """
import os, time
import numpy as np, tfmpi
tfmpi.init()
start = time.monotonic()
try:
    tfmpi.allreduce(np.ones(2), name=f"only-on-rank-{tfmpi.rank()}")
except tfmpi.TfmpiError as e:
    os.write(1, f"FAILED after {time.monotonic() - start:.1f} s: {e}\\n".encode())
"""


def test_diverged_ranks_fail_within_seconds_by_default():
    # Each rank waits for a collective the other never submits: with the default
    # TFMPI_STALL_TIMEOUT_SECONDS (10 s, Note [Deadlock]) both fail, saying so.
    r = run_python(2, ["-c", DIVERGED], timeout=120)
    lines = [line for line in r.stdout.splitlines() if line.startswith("FAILED")]
    assert len(lines) == 2, r.stdout
    for line in lines:
        assert "ran different sequences of collectives" in line, line
        assert 9.0 <= float(line.split()[2]) < 30.0, line


@pytest.mark.quick
def test_every_error_class_is_importable_from_tfmpi():
    """The docs name errors as tfmpi.X (tfmpi.BatchMismatchError): each one of
    tfmpi.errors is there and in __all__."""
    r = run([sys.executable, "-c",
             "import inspect, tfmpi, tfmpi.errors as e\n"
             "names = [n for n, c in inspect.getmembers(e, inspect.isclass) "
             "if issubclass(c, e.TfmpiError)]\n"
             "missing = [n for n in names if getattr(tfmpi, n, None) is not getattr(e, n) "
             "or n not in tfmpi.__all__]\n"
             "print(len(names), missing)"], timeout=60)
    assert r.returncode == 0, r.stdout
    assert r.stdout.split()[-1] == "[]" and int(r.stdout.split()[0]) >= 7, r.stdout
