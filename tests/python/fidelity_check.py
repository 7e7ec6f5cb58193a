"""Running a fidelity script (fidelity/*.py) and comparing a multi-rank run
with the 1-process run: shared by test_fidelity.py and the multi-host tests
(tests/cluster). See test_fidelity.py for what is compared."""

import glob
import json
import os
import sys

import numpy as np

from mpirun_util import HERE, run

FIDELITY = os.path.join(HERE, "fidelity")
RTOL = 1e-5
WEIGHT_TOL = 1e-4
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def launch(launcher, args, out, env, timeout):
    """Run fidelity script args[0] (with args[1:]) writing to `out`, after `launcher` argv."""
    return run(launcher + [sys.executable, os.path.join(FIDELITY, args[0]), str(out)] + args[1:],
               timeout=timeout, env={**QUIET, **env})


RUNNER = os.path.join(HERE, "scripts", "run_in_turn.py")


def launch_kinds(launcher, kinds, root, env, timeout):
    """Run kinds [(name, args, own environment)] one after another in one
    process per rank (scripts/run_in_turn.py; args[0] a script's path from
    tests/python), kind NAME writing to root/NAME. Returns (CompletedProcess,
    {name: its part of the output})."""
    spec = os.path.join(str(root), "kinds.json")
    with open(spec, "w") as f:
        json.dump([{"name": n, "args": list(a), "env": e} for n, a, e in kinds], f)
    r = run(launcher + [sys.executable, RUNNER, str(root), spec], timeout=timeout,
            env={**QUIET, **env})
    return r, sections(r.stdout)


def sections(stdout):
    """{name: output} split at run_in_turn.py's `KIND name` lines."""
    parts, name = {}, None
    for line in stdout.splitlines(keepends=True):
        if line.startswith("KIND "):
            name = line[5:].strip()
            parts[name] = ""
        elif name is not None:
            parts[name] += line
    return parts


def finished(r, parts, name):
    """Asserts that kind `name` of a run_in_turn.py run finished: its part of the
    output says it ended (KIND_DONE), and the process succeeded, or failed only
    in a later kind."""
    part = parts.get(name)
    assert part is not None, f"{name} did not start: an earlier kind of its process failed\n" \
        + r.stdout
    ended = f"KIND_DONE {name}\n" in part
    assert ended and (r.returncode == 0 or list(parts)[-1] != name), \
        f"{name}: exit status {r.returncode}\n{r.stdout}"


def reference_kinds(kinds, env, root):
    """The plain 1-process runs of kinds [(name, args, own environment)], in one
    process: {name: (result, final weights as float64, its output)}."""
    r, parts = launch_kinds([], kinds, root, env, timeout=120 + 60 * len(kinds))
    assert r.returncode == 0, r.stdout
    out = {}
    for name, _, _ in kinds:
        folder = os.path.join(str(root), name)
        (result,) = results(folder).values()
        values = np.load(glob.glob(os.path.join(folder, "values-*.npy"))[0])
        out[name] = (result, values, parts[name])
    return out


def results(out):
    return {p: json.load(open(p)) for p in sorted(glob.glob(os.path.join(str(out), "run-*.json")))}


def reference(args, env, out):
    """The plain 1-process run: (result, final weights as float64, stdout)."""
    r = launch([], args, out, env, timeout=400)
    assert r.returncode == 0, r.stdout
    (result,) = results(out).values()
    values = np.load(glob.glob(os.path.join(str(out), "values-*.npy"))[0])
    return result, values, r.stdout


def assert_same_run(got, ref, where):
    r_loss, g_loss = np.array(ref["losses"]), np.array(got["losses"])
    assert len(g_loss) == len(r_loss), where
    allowed = RTOL * np.abs(r_loss) + np.array(ref["bounds"]) + np.array(got["bounds"])
    off = np.flatnonzero(np.abs(g_loss - r_loss) > allowed)
    assert off.size == 0, (f"{where}: step {off[0]}: loss {g_loss[off[0]]!r}, 1-process "
                           f"{r_loss[off[0]]!r} ({off.size} steps differ)")
    for key in ("eval", "extra"):
        np.testing.assert_allclose(got[key], ref[key], rtol=RTOL, err_msg=f"{where}: {key}")


def assert_matches(ref, out, np_, stdout):
    """Every rank's results in `out` match the reference (result, values, stdout)."""
    ref_result, ref_values, ref_stdout = ref
    per_rank = results(out)
    assert len(per_rank) == np_, f"expected one result file per rank: {list(per_rank)}"
    for path, got in per_rank.items():
        assert_same_run(got, ref_result, path)
    weights = [np.load(p) for p in sorted(glob.glob(os.path.join(str(out), "weights-*.npy")))]
    assert len(weights) == np_
    for w in weights[1:]:
        assert np.array_equal(w, weights[0]), "final weights differ between ranks"
    values = np.load(sorted(glob.glob(os.path.join(str(out), "values-*.npy")))[0])
    drift = np.abs(values - ref_values).max()
    assert drift <= WEIGHT_TOL * max(1.0, np.abs(ref_values).max()), \
        f"final weights drift {drift} from the 1-process run's"

    # only rank 0 prints: the same lines as the 1-process run, once
    def lines(text, tag):
        return [l for l in text.splitlines() if l.startswith(tag)]
    assert len(lines(stdout, "RUN_DONE")) == 1, stdout
    assert len(lines(stdout, "EPOCH")) == len(lines(ref_stdout, "EPOCH"))
