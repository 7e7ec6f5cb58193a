"""Start-up hook that tfmpirun puts first on PYTHONPATH.

It chain-loads the sitecustomize this one shadows (Debian's Python ships one),
then, in a process launched by tfmpirun, turns on transparent mode.
"""

import importlib.util
import os
import sys


def _chain_load_shadowed():
    # The first sitecustomize after this folder on sys.path: the one Python
    # would have run. (Python runs the first it finds, so none comes before
    # this one unless another hook loaded this one; looking before it as well
    # would then load that hook again, and it this one, without end.)
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    for folder in folders[folders.index(here) + 1:] if here in folders else folders:
        if folder == here:
            continue
        for candidate in (os.path.join(folder, "sitecustomize.py"),
                          os.path.join(folder, "sitecustomize", "__init__.py")):
            if os.path.isfile(candidate):
                spec = importlib.util.spec_from_file_location("_tfmpi_shadowed_sitecustomize", candidate)
                module = importlib.util.module_from_spec(spec)
                try:
                    spec.loader.exec_module(module)
                except Exception as e:  # the shadowed hook's failure must not stop the run
                    print(f"tfmpi: the shadowed {candidate} failed: {e}", file=sys.stderr)
                return


_chain_load_shadowed()

if os.environ.get("TFMPI_TRANSPARENT") == "1":
    from tfmpi.transparent import activate

    try:
        activate()
    except SystemExit as e:
        # Start-up refused (an invalid TFMPI_* value, printed already). Raised out
        # of site's import, SystemExit would end in "Fatal Python error:
        # init_import_site" and two tracebacks; end here instead, with its code.
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) and e.code else 2)
