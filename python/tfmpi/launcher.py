"""The `tfmpirun` console script: runs the C++ launcher installed with tfmpi.

The launcher lives at <package>/bin/tfmpirun; this shim hands it the folder
of tfmpi's start-up hook (<package>/_site, which holds sitecustomize.py) so
that it can put it first on every rank's PYTHONPATH. It starts no MPI and
replaces itself with the launcher, so the exit status is the launcher's
(that is, mpirun's).
"""

import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def launcher_path():
    return os.path.join(_PACKAGE, "bin", "tfmpirun")


def site_dir():
    return os.path.join(_PACKAGE, "_site")


def main():
    binary = launcher_path()
    if not os.access(binary, os.X_OK):
        print(f"tfmpirun: the launcher binary is missing: {binary} does not exist or is not "
              "executable. Reinstall tfmpi (pip install --force-reinstall tfmpi, or "
              "pip install . from a source checkout) so that it is built.", file=sys.stderr)
        return 127
    argv = [binary, "--tfmpi-site-dir", site_dir()] + sys.argv[1:]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, argv)


if __name__ == "__main__":
    sys.exit(main())
