#!/usr/bin/env bash
# Installs whatever is missing, then runs the whole test suite:
#   tier 1 logic tests and tier 2 real-MPI tests (CTest), the logic tests again
#   under ASan and TSan (scripts/sanitizers.sh logic), tier 3 Python tests (pytest),
#   the emulated-cluster tier (tests/cluster: hosts as network namespaces; needs
#   root, skipped with the reason elsewhere; Open MPI, and MPICH with tfmpi built
#   against it by scripts/mpich.sh), and the fidelity tier again, at 2
#   ranks, with the oldest supported Keras 3.
# Every test that starts processes has a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh

echo "== C++ logic and MPI tests (ctest) =="
cmake -S . -B build/tests -G Ninja -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_TESTS=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/tests
ctest --test-dir build/tests --output-on-failure --timeout 600 -j 2

echo "== C++ logic tests under AddressSanitizer and ThreadSanitizer =="
bash scripts/sanitizers.sh logic

echo "== Python tests (pytest) =="
# -rs: every skipped test is listed with its reason.
"$PYTHON" -m pytest -q -rs --durations=25 -p no:cacheprovider tests/python tests/launcher

echo "== Emulated cluster: the harness, tfmpirun across hosts, Open MPI and MPICH (pytest) =="
# tfmpi built against MPICH as well (build/mpich-venv), for the MPICH tests of this
# tier, where the tier can run (root); there, those tests fail rather than skip
# without it (tests/cluster/mpich.py).
if [ "$(id -u)" -eq 0 ]; then
  bash scripts/mpich.sh
  export TFMPI_REQUIRE_MPICH=1
fi
"$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/cluster

# The oldest Keras 3 minor transparent mode supports (tfmpi/transparent/versions.py),
# in a virtual environment that sees everything else from this Python.
OLDEST=$("$PYTHON" -c "from tfmpi.transparent.versions import TESTED; print('%d.%d.*' % TESTED['keras'][0])")
echo "== Fidelity tier with keras==$OLDEST (2 ranks) =="
VENV=build/keras-oldest
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
HAS_OLDEST="import keras, sys; sys.exit(not keras.__version__.startswith('${OLDEST%.*}.'))"
"$VENV/bin/python" -c "$HAS_OLDEST" 2>/dev/null ||
  "$VENV/bin/python" -m pip install -q --no-deps "keras==$OLDEST" > "$VENV/pip.log" 2>&1 ||
  { cat "$VENV/pip.log"; echo "test.sh: could not install keras==$OLDEST" >&2; exit 1; }
"$VENV/bin/python" -c "$HAS_OLDEST" || { echo "test.sh: $VENV does not run keras==$OLDEST" >&2; exit 1; }
TFMPI_FIDELITY_SIZES=2 "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider \
    tests/python/test_fidelity.py -k "not tf_keras"
# The sharded update of a LossScaleOptimizer, whose own variable list Keras
# leaves empty before 3.12.
"$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests/python/test_sharded_update.py \
    -k "overflows or 2-True-norm-True"
