"""Every Python test tier (python, launcher, cluster): the processes the tests
start run without scikit-learn, matplotlib and IPython importable (lean_site/),
and the fidelity scripts read scikit-learn's digits from a file written here
once per session (not again in a session started inside one, such as the
pytest that the numpy-API tests run on every rank)."""

import os
import shutil
import tempfile

LEAN_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lean_site")
_made = []


def pytest_configure(config):
    # Put on PYTHONPATH before any test starts a process; tfmpirun keeps its own
    # start-up folder first and forwards the rest to every host.
    path = os.environ.get("PYTHONPATH", "")
    if LEAN_SITE not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (LEAN_SITE, path) if p)
    if os.path.isfile(os.environ.get("TESTS_DIGITS_FILE", "")):
        return
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # the tests that need the digits skip, saying so
        return
    import numpy as np

    folder = tempfile.mkdtemp(prefix="tfmpi-tests-")
    _made.append(folder)
    x, y = load_digits(return_X_y=True)
    np.savez(os.path.join(folder, "digits.npz"), x=x, y=y)
    os.environ["TESTS_DIGITS_FILE"] = os.path.join(folder, "digits.npz")


def pytest_unconfigure(config):
    for folder in _made:
        shutil.rmtree(folder, ignore_errors=True)
