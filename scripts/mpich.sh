#!/usr/bin/env bash
# tfmpi built against MPICH, next to the default Open MPI build, for the tests
# that check MPICH (tests/cluster: Hydra across emulated hosts). Installs
# Debian's mpich and libmpich-dev if missing (Open MPI stays the default
# mpirun and mpicxx: its alternatives rank higher), then builds tfmpi against
# MPICH into a virtual environment that sees everything else from this Python:
#   build/mpich-venv/bin/python, build/mpich-venv/bin/tfmpirun
# Without the TensorFlow ops (the engine, the numpy API and the launcher only),
# and at -O1 (the tests check that it works with MPICH, not how fast), so the
# build takes a minute or two. Incremental (build/mpich-wheel is kept).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=build/mpich-venv

bash scripts/apt_install.sh mpich libmpich-dev

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
echo "tfmpi mpich: building tfmpi against MPICH into $VENV (incremental)"
PIP_ROOT_USER_ACTION=ignore "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps . \
    -C build-dir=build/mpich-wheel -C cmake.define.MPI_CXX_COMPILER=/usr/bin/mpicxx.mpich \
    -C cmake.define.MPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich -C cmake.define.TFMPI_BUILD_TF_OPS=OFF \
    -C "cmake.define.CMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
# The engine must load MPICH's library, not Open MPI's.
"$VENV/bin/python" - <<'PY' || { echo "tfmpi mpich: the MPICH build did not install" >&2; exit 1; }
import sys, tfmpi._core
maps = open("/proc/self/maps").read()
sys.exit(0 if "libmpich" in maps and "libmpi.so.40" not in maps else 1)
PY
