#!/usr/bin/env bash
# Installs whatever is missing, then runs the whole test suite:
#   tier 1 logic tests and tier 2 real-MPI tests (CTest), the logic tests again
#   under ASan and TSan (scripts/sanitizers.sh logic), tier 3 Python tests (pytest),
#   the emulated-cluster tier (tests/cluster: hosts as network namespaces; needs
#   root, skipped with the reason elsewhere; Open MPI, and MPICH with tfmpi built
#   against it by scripts/mpich.sh), and the fidelity tier again, at 2
#   ranks, with the oldest supported Keras 3.
# Every test that starts processes has a timeout.
#
# The Python tier runs first. While it runs, the builds the other tiers need
# (the CTest tree, the two sanitizer trees, tfmpi against MPICH, the oldest
# Keras) run in the background at the lowest CPU priority (nice 19): the
# Python tier leaves about a fifth of this machine's two cores idle (single
# processes, start-up, teardown), and the builds take that time instead of
# running after it. Their output goes to build/test-builds.log, printed if
# they fail. Each tier's heading says when it started.
# The emulated-cluster tier keeps only about a tenth of the cores busy (its
# tests mostly wait: for a lost host's timeout, for ranks held to a CPU quota),
# so most of it runs in the background beside the sanitizer and oldest-Keras
# tiers. Its tests that measure speed (marked measures_speed: CPU quotas and
# load as the probes see them, placement and shares by speed, link bandwidth)
# run afterwards, alone: beside other work, the probes of one run saw its
# one-core host only 1.5x as fast as its 0.4-core host, and a test of the
# shares failed (nice does not keep other work from slowing a host that wants
# a whole core). The two runs select complementary sets: every test runs once.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
START=$(date +%s)
tier() { echo "== $* (at $(( $(date +%s) - START )) s) =="; }

bash scripts/setup.sh
ROOT=0
[ "$(id -u)" -eq 0 ] && ROOT=1
# Installed now, not while tests run (the emulated-cluster tier runs MPICH too).
[ "$ROOT" -eq 1 ] && bash scripts/apt_install.sh mpich libmpich-dev

# The oldest Keras 3 minor transparent mode supports (tfmpi/transparent/versions.py),
# in a virtual environment that sees everything else from this Python.
OLDEST=$("$PYTHON" -c "from tfmpi.transparent.versions import TESTED; print('%d.%d.*' % TESTED['keras'][0])")
VENV=build/keras-oldest
HAS_OLDEST="import keras, sys; sys.exit(not keras.__version__.startswith('${OLDEST%.*}.'))"

# No TensorFlow ops in the CTest tree: no CTest test loads them, and the wheel
# that setup.sh installed has already compiled them (their TensorFlow headers
# made them the slowest compiles of the tree).
builds() {
  cmake -S . -B build/tests -G Ninja -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_TESTS=ON \
        -DTFMPI_BUILD_TF_OPS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build/tests
  bash scripts/sanitizers.sh logic-build
  # tfmpi built against MPICH as well (build/mpich-venv), for the MPICH tests of
  # the emulated-cluster tier, where the tier can run (root).
  [ "$ROOT" -eq 0 ] || bash scripts/mpich.sh
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -c "$HAS_OLDEST" 2>/dev/null ||
    "$VENV/bin/python" -m pip install -q --no-deps "keras==$OLDEST" ||
    { echo "test.sh: could not install keras==$OLDEST" >&2; return 1; }
  "$VENV/bin/python" -c "$HAS_OLDEST" || { echo "test.sh: $VENV does not run keras==$OLDEST" >&2; return 1; }
}
mkdir -p build
BUILD_LOG=build/test-builds.log
tier "Building the other tiers' trees in the background (nice 19, log: $BUILD_LOG)"
# Job control on for this one job: it gets its own process group, so that an
# early exit (a failed test) stops the whole build with it.
set -m
( set -e; renice -n 19 -p "$BASHPID" >/dev/null; builds ) > "$BUILD_LOG" 2>&1 < /dev/null &
BUILDS=$!
set +m
trap 'kill -- "-$BUILDS" 2>/dev/null || true' EXIT

tier "Python tests (pytest)"
# -rs: every skipped test is listed with its reason.
"$PYTHON" -m pytest -q -rs --durations=25 -p no:cacheprovider tests/python tests/launcher

tier "Waiting for the background builds"
wait "$BUILDS" || { cat "$BUILD_LOG"; echo "test.sh: the background builds failed (above)" >&2; exit 1; }
trap - EXIT
tail -n 3 "$BUILD_LOG"

tier "C++ logic and MPI tests (ctest)"
ctest --test-dir build/tests --output-on-failure --timeout 600 -j 2

# Where the cluster tier can run (root), the MPICH tests fail rather than skip
# without the MPICH build (tests/cluster/mpich.py).
[ "$ROOT" -eq 1 ] && export TFMPI_REQUIRE_MPICH=1
CLUSTER_LOG=build/test-cluster.log
tier "Emulated cluster, all but the tests that measure speed: started in the background (log: $CLUSTER_LOG)"
set -m
"$PYTHON" -m pytest -q -rs -p no:cacheprovider -m "not measures_speed" tests/cluster \
    > "$CLUSTER_LOG" 2>&1 < /dev/null &
CLUSTER=$!
set +m
# On an early exit the tests get SIGTERM: the harness removes its hosts.
trap 'kill -- "-$CLUSTER" 2>/dev/null || true' EXIT

tier "C++ logic tests under AddressSanitizer and ThreadSanitizer"
bash scripts/sanitizers.sh logic

tier "Fidelity tier with keras==$OLDEST (2 ranks)"
TFMPI_FIDELITY_SIZES=2 "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider \
    tests/python/test_fidelity.py -k "not tf_keras"
# The sharded update of a LossScaleOptimizer, whose own variable list Keras
# leaves empty before 3.12.
"$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests/python/test_sharded_update.py \
    -k "overflows or 2-True-norm-True"

tier "Emulated cluster: waiting for the background tests ($CLUSTER_LOG)"
cluster_rc=0
wait "$CLUSTER" || cluster_rc=$?
trap - EXIT
cat "$CLUSTER_LOG"
[ "$cluster_rc" -eq 0 ] || { echo "test.sh: emulated-cluster tests failed (above)" >&2; exit 1; }

tier "Emulated cluster: the tests that measure speed, alone (pytest -m measures_speed)"
"$PYTHON" -m pytest -q -rs -p no:cacheprovider -m measures_speed tests/cluster
tier "Done"
