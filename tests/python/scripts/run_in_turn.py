"""Runs several test scripts one after another in one process, as a user's
script that trains several models in turn would: the same process under
`tfmpirun -np N` for every rank, or a plain 1-process run.

Usage: run_in_turn.py OUT_ROOT RUNS.json

RUNS.json: [{"name": NAME, "args": [SCRIPT, ARG...], "env": {KEY: VALUE}}, ...],
SCRIPT a path relative to tests/python (fidelity/train_fit.py) or absolute.
Each script runs as __main__ with argv [SCRIPT, OUT_ROOT/NAME, ARG...], its
folder first on sys.path (as when it is run itself), its "env" added to the
environment (the script's own settings, such as FIDELITY_SGD; tfmpi's TFMPI_*
settings are read once at start-up and so belong to the whole process), and
writes its files into OUT_ROOT/NAME (made here). Before each one, a line
`KIND NAME` marks where its output starts; after it, `KIND_DONE NAME` that it
ended. Between them the Keras session is
cleared, the float32 policy restored and the modules of the script's folder
(fidelity/common.py keeps one training's results) imported afresh.

Starting a process costs more on this machine's two cores than most of these
scripts' training (importing TensorFlow alone takes about 3.5 s of CPU), so
the test tiers start one process per rank for a group of runs, not one per run.
"""

import gc
import json
import os
import runpy
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse(path):
    with open(path) as f:
        runs = json.load(f)
    for run in runs:
        if not run.get("name") or not run.get("args"):
            raise SystemExit(f"run_in_turn.py: {path}: every run needs a name and args: {run!r}")
        if any(key.startswith("TFMPI_") for key in run.get("env", {})):
            raise SystemExit(f"run_in_turn.py: {path}: {run['name']}: TFMPI_* settings belong "
                             "to the process, not to one run")
    return runs


def reset(folder):
    """What one script leaves behind that the next must not see."""
    for name, module in list(sys.modules.items()):
        if os.path.dirname(os.path.abspath(getattr(module, "__file__", None) or "/")) == folder:
            del sys.modules[name]
    for name in ("keras", "tf_keras"):
        keras = sys.modules.get(name)
        if keras is not None and hasattr(keras, "backend"):
            keras.backend.clear_session()
            keras.mixed_precision.set_global_policy("float32")
    gc.collect()


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    root, runs = argv[1], parse(argv[2])
    folder = None
    for run in runs:
        out = os.path.join(root, run["name"])
        os.makedirs(out, exist_ok=True)
        print(f"KIND {run['name']}", flush=True)
        if folder is not None:
            reset(folder)
        script = os.path.join(TESTS, run["args"][0])
        folder = os.path.dirname(script)
        saved = dict(os.environ)
        os.environ.update(run.get("env", {}))
        sys.argv = [script, out] + list(run["args"][1:])
        sys.path.insert(0, folder)
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            sys.path.remove(folder)
        print(f"KIND_DONE {run['name']}", flush=True)
        os.environ.clear()
        os.environ.update(saved)
    if folder is not None:
        reset(folder)


if __name__ == "__main__":
    main(sys.argv)
