"""Runs several fidelity scripts one after another in one process, as a user's
script that trains several models in turn would: the same process under
`tfmpirun -np N` for every rank, or a plain 1-process run.

Usage: run_kinds.py OUT_ROOT KINDS.json

KINDS.json: [{"name": NAME, "args": [SCRIPT, ARG...], "env": {KEY: VALUE}}, ...].
Each script runs as __main__ with argv [SCRIPT, OUT_ROOT/NAME, ARG...] and its
"env" added to the environment (settings of the scripts, such as FIDELITY_SGD;
tfmpi's own TFMPI_* settings are read once at start-up and so belong to the
whole process), and writes its files into OUT_ROOT/NAME (made here). Before
each one, a line `KIND NAME` marks where its output starts; between them the
Keras session is cleared, the float32 policy restored and the scripts' shared
module (common.py, which keeps one training's results) imported afresh. Starting a process costs
more here than most of a script's training (importing TensorFlow alone takes
about 3.5 s of CPU per process on this machine's two cores): the fidelity tier
starts one process per rank for a group of kinds, not one per kind."""

import gc
import json
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(path):
    with open(path) as f:
        kinds = json.load(f)
    for kind in kinds:
        if not kind.get("name") or not kind.get("args"):
            raise SystemExit(f"run_kinds.py: {path}: every kind needs a name and args: {kind!r}")
        if any(key.startswith("TFMPI_") for key in kind.get("env", {})):
            raise SystemExit(f"run_kinds.py: {path}: {kind['name']}: TFMPI_* settings belong to "
                             "the process, not to one kind")
    return kinds


def reset():
    """What one script leaves behind that the next must not see."""
    common = sys.modules.pop("common", None)
    if common is not None:
        keras = common.keras
        keras.backend.clear_session()
        keras.mixed_precision.set_global_policy("float32")
    gc.collect()


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    root, kinds = argv[1], parse(argv[2])
    for kind in kinds:
        out = os.path.join(root, kind["name"])
        os.makedirs(out, exist_ok=True)
        print(f"KIND {kind['name']}", flush=True)
        reset()
        saved = dict(os.environ)
        os.environ.update(kind.get("env", {}))
        script = os.path.join(HERE, kind["args"][0])
        sys.argv = [script, out] + list(kind["args"][1:])
        runpy.run_path(script, run_name="__main__")
        os.environ.clear()
        os.environ.update(saved)
    reset()


if __name__ == "__main__":
    main(sys.argv)
