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
# The Python tier runs first. It leaves about a quarter of this machine's two
# cores idle (1-process reference runs, start-up, teardown), so meanwhile the
# builds the other tiers need (the CTest tree, the two sanitizer trees, tfmpi
# against MPICH, the oldest Keras), and after them the fidelity tier with the
# oldest Keras, run in the background at the lowest CPU priority (nice 19),
# taking that idle time instead of running after the Python tier. Their output
# goes to build/test-builds.log and build/test-keras-oldest.log, printed when
# they are waited for. Each tier's heading says when it started.
# The emulated-cluster tier keeps only about a tenth of the cores busy (its
# tests mostly wait: for a lost host's timeout, for ranks held to a CPU quota),
# so most of it runs in the background too, at normal priority, from when the
# builds are done, beside the Python tier, the sanitizer tier and the
# oldest-Keras tier. Its tests that measure speed (marked
# measures_speed: CPU quotas and load as the probes see them, placement and
# shares by speed, link bandwidth) run afterwards, alone: beside other work,
# the probes of one run saw its one-core host only 1.5x as fast as its
# 0.4-core host, and a test of the shares failed (nice does not keep other
# work from slowing a host that wants a whole core). The two runs select
# complementary sets: every test runs once.
#
#   bash scripts/test.sh quick   the quick tier, before every commit (README: its time):
#     the C++ tests that start no MPI job, the Python tests marked quick (in-process
#     unit tests, the docs and notes check, the parts the patches need resolved on both
#     Keras lines, with the oldest Keras 3 too (build/keras-oldest), and one real
#     2-rank training run checked against the 1-process run by tfmpirun --verify).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
START=$(date +%s)
tier() { echo "== $* (at $(( $(date +%s) - START )) s) =="; }

case "${1:-all}" in
  all|quick) ;;
  *) echo "usage: bash scripts/test.sh [quick]   (no argument: the whole suite)" >&2; exit 2 ;;
esac

bash scripts/setup.sh

# The oldest Keras 3 minor transparent mode supports (tfmpi/transparent/versions.py),
# in a virtual environment that sees everything else from this Python.
OLDEST=$("$PYTHON" -c "from tfmpi.transparent.versions import TESTED; print('%d.%d.*' % TESTED['keras'][0])")
VENV=build/keras-oldest
HAS_OLDEST="import keras, sys; sys.exit(not keras.__version__.startswith('${OLDEST%.*}.'))"
oldest_venv() {
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -c "$HAS_OLDEST" 2>/dev/null ||
    "$VENV/bin/python" -m pip install -q --no-deps "keras==$OLDEST" ||
    { echo "test.sh: could not install keras==$OLDEST" >&2; return 1; }
  "$VENV/bin/python" -c "$HAS_OLDEST" || { echo "test.sh: $VENV does not run keras==$OLDEST" >&2; return 1; }
}

if [ "${1:-all}" = quick ]; then
  tier "Quick tier: C++ tests that start no MPI job (ctest -LE mpi)"
  cmake -S . -B build/tests -G Ninja -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_TESTS=ON \
        -DTFMPI_BUILD_TF_OPS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
  cmake --build build/tests
  ctest --test-dir build/tests --output-on-failure --timeout 300 -j 2 -LE mpi
  tier "Quick tier: Python tests marked quick (pytest -m quick)"
  "$PYTHON" -m pytest -q -rs -p no:cacheprovider -m quick tests/python tests/launcher
  tier "Quick tier: the parts the patches need, with keras==$OLDEST ($VENV)"
  oldest_venv
  "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider \
      tests/python/test_versions.py tests/python/test_patch_registry.py \
      -k "resolves or have_every_target"
  tier "Quick tier done"
  exit 0
fi
ROOT=0
[ "$(id -u)" -eq 0 ] && ROOT=1
# Installed now, not while tests run (the emulated-cluster tier runs MPICH too).
[ "$ROOT" -eq 1 ] && bash scripts/apt_install.sh mpich libmpich-dev


# No TensorFlow ops in the CTest tree: no CTest test loads them, and the wheel
# that setup.sh installed has already compiled them (their TensorFlow headers
# made them the slowest compiles of the tree). Line tables only (-g1): failures
# still show file and line, and full debug information took a third of the
# compile time (scripts/sanitizers.sh does the same).
builds() {
  cmake -S . -B build/tests -G Ninja -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_TESTS=ON \
        -DTFMPI_BUILD_TF_OPS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
  cmake --build build/tests
  bash scripts/sanitizers.sh logic-build
  # tfmpi built against MPICH as well (build/mpich-venv), for the MPICH tests of
  # the emulated-cluster tier, where the tier can run (root).
  [ "$ROOT" -eq 0 ] || bash scripts/mpich.sh
  oldest_venv
}
# The fidelity tier again, at 2 ranks, with the oldest supported Keras 3 (not the
# kinds' SGD variants: they take the code paths of the SGD kinds, which run).
oldest_keras_tier() {
  TFMPI_FIDELITY_SIZES=2 "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider \
      tests/python/test_fidelity.py -k "not tf_keras and not _sgd"
  # The sharded update of a LossScaleOptimizer, whose own variable list Keras
  # leaves empty before 3.12.
  "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests/python/test_sharded_update.py \
      -k "overflows or 2-True-norm-True"
}
# The emulated-cluster tier but its tests that measure speed, at normal priority
# (its tests wait for timeouts that a starved process would miss); its exit
# status goes to $CLUSTER_RC.
cluster_tier() {
  [ "$ROOT" -eq 0 ] || renice -n 0 -p "$BASHPID" >/dev/null
  local rc=0
  "$PYTHON" -m pytest -q -rs -p no:cacheprovider -m "not measures_speed" tests/cluster || rc=$?
  echo "$rc" > "$CLUSTER_RC"
}
mkdir -p build
BUILD_LOG=build/test-builds.log
OLDEST_LOG=build/test-keras-oldest.log
CLUSTER_LOG=build/test-cluster.log
CLUSTER_RC=build/test-cluster.rc
BUILDS_DONE=build/test-builds.done
rm -f "$BUILDS_DONE" "$CLUSTER_RC"
# Where the cluster tier can run (root), the MPICH tests fail rather than skip
# without the MPICH build (tests/cluster/mpich.py).
[ "$ROOT" -eq 1 ] && export TFMPI_REQUIRE_MPICH=1
tier "In the background (nice 19): the other tiers' builds (log: $BUILD_LOG), then the emulated cluster but its tests that measure speed (log: $CLUSTER_LOG) beside the fidelity tier with keras==$OLDEST (log: $OLDEST_LOG)"
# Job control on for this one job: it gets its own process group, so that an
# early exit (a failed test) stops all of it.
set -m
( set -e; renice -n 19 -p "$BASHPID" >/dev/null; builds; touch "$BUILDS_DONE"
  cluster_tier > "$CLUSTER_LOG" 2>&1 &
  oldest_keras_tier > "$OLDEST_LOG" 2>&1
  wait ) > "$BUILD_LOG" 2>&1 < /dev/null &
BACKGROUND=$!
set +m
# On an early exit (a failed tier) every background job is stopped; the
# emulated-cluster tests get SIGTERM, and the harness removes its hosts.
BG_JOBS=("$BACKGROUND")
stop_background() { for job in "${BG_JOBS[@]}"; do kill -- "-$job" 2>/dev/null || true; done; }
trap stop_background EXIT

tier "Python tests (pytest)"
# -rs: every skipped test is listed with its reason. Every test's time is kept in
# build/pytest-python.xml (JUnit XML), the 25 slowest printed.
"$PYTHON" -m pytest -q -rs --durations=25 -p no:cacheprovider --junitxml=build/pytest-python.xml \
    tests/python tests/launcher

tier "Waiting for the background builds"
while [ ! -e "$BUILDS_DONE" ]; do
  if ! kill -0 "$BACKGROUND" 2>/dev/null; then
    cat "$BUILD_LOG"; echo "test.sh: the background builds failed (above)" >&2; exit 1
  fi
  sleep 2
done
tail -n 3 "$BUILD_LOG"

tier "C++ logic and MPI tests (ctest)"
ctest --test-dir build/tests --output-on-failure --timeout 600 -j 2

tier "C++ logic tests under AddressSanitizer and ThreadSanitizer"
bash scripts/sanitizers.sh logic

tier "Fidelity tier with keras==$OLDEST (2 ranks): waiting for it ($OLDEST_LOG)"
oldest_rc=0
wait "$BACKGROUND" || oldest_rc=$?
cat "$OLDEST_LOG"
[ "$oldest_rc" -eq 0 ] || { echo "test.sh: the keras==$OLDEST tier failed (above)" >&2; exit 1; }

tier "Emulated cluster, all but the tests that measure speed ($CLUSTER_LOG)"
trap - EXIT
cat "$CLUSTER_LOG"
[ "$(cat "$CLUSTER_RC" 2>/dev/null)" = 0 ] ||
  { echo "test.sh: emulated-cluster tests failed (above)" >&2; exit 1; }

tier "Emulated cluster: the tests that measure speed, alone (pytest -m measures_speed)"
"$PYTHON" -m pytest -q -rs -p no:cacheprovider -m measures_speed tests/cluster
tier "Done"
