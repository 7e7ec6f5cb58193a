"""Test runs made in groups: every run with the same launcher (a plain
process, or `tfmpirun -np N` with its flags) and the same process
environment (TFMPI_* settings, the Keras line) runs in turn in one process
per rank (scripts/run_in_turn.py), as a script that trains several models in
turn. Starting a process costs more on this machine than most of these runs
(importing TensorFlow alone takes about 3.5 s of CPU), so a test module makes
all the runs its selected tests check at the first request, and each test
checks its own run: its folder and its part of the output."""

import collections

import fidelity_check

# launcher: argv before the python of run_in_turn.py ((): a plain process);
# env: the whole process's environment (TFMPI_* settings, TF_USE_LEGACY_KERAS);
# args: the script (a path from tests/python) and its arguments after the
# output folder; own: the run's own environment (not TFMPI_*).
Run = collections.namedtuple("Run", "launcher env args own", defaults=({},))


def launch(runs, root, timeout_per_run=60):
    """Makes every run of `runs` ({name: Run}); returns {name: (the process's
    CompletedProcess, or the AssertionError of its timeout; {name: its part of
    the output}; the run's folder)}. Names must be unique."""
    groups = collections.defaultdict(list)
    for name, run in runs.items():
        groups[tuple(run.launcher), tuple(sorted(run.env.items()))].append(name)
    made = {}
    for k, ((launcher, env), names) in enumerate(groups.items()):
        folder = root / f"group-{k}"
        folder.mkdir()
        try:
            r, parts = fidelity_check.launch_kinds(
                list(launcher), [(n, runs[n].args, runs[n].own) for n in names], folder,
                dict(env), timeout=120 + timeout_per_run * len(names))
        except AssertionError as e:  # a hang: every run of the process fails with it
            r, parts = e, {}
        made.update({n: (r, parts, folder / n) for n in names})
    return made


def checked(made, name):
    """(folder, part of the output) of run `name`, after asserting it finished
    (fidelity_check.finished)."""
    r, parts, folder = made[name]
    if isinstance(r, AssertionError):
        raise r
    fidelity_check.finished(r, parts, name)
    return folder, parts[name]


def selected(request, run_of):
    """The runs the session's selected tests check: run_of(item) gives an
    item's run names (none for other tests)."""
    names = []
    for item in request.session.items:
        for name in run_of(item):
            if name not in names:
                names.append(name)
    return names


def params(item, test):
    """The parameters of `item` where it is a case of test function `test`, else None."""
    if getattr(item, "originalname", None) != test:
        return None
    return dict(getattr(getattr(item, "callspec", None), "params", {}))
