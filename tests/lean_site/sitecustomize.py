"""The processes the tests start import TensorFlow without scikit-learn,
matplotlib and IPython (tests/conftest.py puts this folder on their PYTHONPATH).

Keras imports all three at start-up wherever they are installed (its
scikit-learn wrappers, its plotting helpers, its notebook display): 2.3 of the
5.1 s of CPU that importing TensorFlow took per process here, and the test
tiers start hundreds of ranks on two cores. tfmpi uses none of them. Here they
import as if not installed (Keras imports each inside try/except ImportError);
importlib.util.find_spec raises ModuleNotFoundError for them instead of
returning None. The fidelity scripts read the digits from the file
tests/conftest.py wrote (TESTS_DIGITS_FILE).
"""

import importlib.util
import os
import sys

HIDDEN = ("sklearn", "matplotlib", "IPython")


class _Hide:
    """A finder that answers first: the hidden packages are missing."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by tests/lean_site)",
                                      name=name)
        return None


def _chain_load_next():
    """Runs the first sitecustomize after this folder on sys.path (the one this
    shadows, Debian's for example). tfmpi's hook, before this folder under
    tfmpirun, loaded this one and looks only after its own folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    for folder in folders[folders.index(here) + 1:] if here in folders else []:
        for path in (os.path.join(folder, "sitecustomize.py"),
                     os.path.join(folder, "sitecustomize", "__init__.py")):
            if os.path.isfile(path):
                spec = importlib.util.spec_from_file_location("_tests_shadowed_sitecustomize", path)
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
                return


sys.meta_path.insert(0, _Hide())
_chain_load_next()
