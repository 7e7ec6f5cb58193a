#!/usr/bin/env bash
# Installs whatever is missing, then runs the whole test suite:
#   tier 1 logic tests and tier 2 real-MPI tests (CTest), tier 3 Python tests (pytest).
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

echo "== Python tests (pytest) =="
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python
