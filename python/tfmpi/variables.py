"""Which TFMPI_* variables tfmpi reads, and which set ones look misspelt.

Kept apart from tfmpi.params (run as `python -m tfmpi.params`), which the
start-up hook must not import: runpy warns when a module it runs is already
loaded."""

import difflib
import os
import sys

from tfmpi import _core
from tfmpi.transparent import config


def known_names():
    """Every TFMPI_* variable tfmpi reads: the engine's registry and transparent mode's."""
    return {s["name"] for s in _core.param_specs()} | {name for name, _, _ in config.VARIABLES}


def unknown_variables(environ=None):
    """(name, the closest known name or None) for each TFMPI_* variable set in `environ`
    (default: this process's) that tfmpi does not read, in name order."""
    environ = os.environ if environ is None else environ
    known = known_names()
    out = []
    for name in sorted(n for n in environ if n.startswith("TFMPI_") and n not in known):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
        out.append((name, close[0] if close else None))
    return out


def misspelt(unknown=None):
    """One line per set TFMPI_* variable that tfmpi does not read but whose name is close
    to one it does: likely a misspelling, whose setting would silently not apply.
    `unknown`: unknown_variables() if already computed."""
    unknown = unknown_variables() if unknown is None else unknown
    return [f"tfmpi: {name} is not a tfmpi variable and is ignored; did you mean {close}?"
            for name, close in unknown if close]


_said = False


def say_misspelt_once(rank):
    """On rank 0, the first time only (the numpy API's init() and transparent mode's
    start-up both ask): one line on stderr per likely misspelt variable."""
    global _said
    if _said:
        return
    _said = True
    if rank == 0:
        for line in misspelt():
            print(line, file=sys.stderr, flush=True)
