#!/usr/bin/env bash
# The engine's tests under AddressSanitizer (build/asan) and ThreadSanitizer
# (build/tsan), each built with its TFMPI_* switch (cmake/Sanitizers.cmake).
#
#   scripts/sanitizers.sh            logic tier and real-MPI tier (mpiexec), ASan then TSan
#   scripts/sanitizers.sh logic      logic tier only (scripts/test.sh runs this)
#   scripts/sanitizers.sh logic-build  builds the logic tier only, runs nothing
#   scripts/sanitizers.sh mpi        real-MPI tier only (without the > 2 GiB tensor)
#   scripts/sanitizers.sh python     numpy-API checks under mpirun -np 2, with the
#                                    extension built with ASan and libasan preloaded
#   SANITIZERS=tsan scripts/sanitizers.sh ...   one sanitizer only (asan, tsan)
#
# A sanitizer report fails the test that printed it. The suppression files in
# tests/sanitizers/ silence third-party noise only (Open MPI), each entry with
# the reason. Every test that starts processes has a timeout. Open MPI only.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
SANITIZERS=${SANITIZERS:-asan tsan}
SUPP=$PWD/tests/sanitizers

# A sanitizer slows the logic tests 3-30x (ThreadSanitizer most: 66-86 s for
# one autotune test that takes 3 s without it), more where other work shares
# the cores: their per-test timeout is 600 s here, not 120 s.
build() {  # build <sanitizer> <targets...>
  local san=$1; shift
  local flag
  flag=TFMPI_$(echo "$san" | tr a-z A-Z)
  # -O1 -g1 (line tables: reports still name file and line): compiles in about
  # half the time of -O2 -g, the level the sanitizers' documentation suggests.
  cmake -S . -B "build/$san" -G Ninja -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_TESTS=ON \
        -DTFMPI_LOGIC_TEST_TIMEOUT=600 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-D$flag=ON" >/dev/null
  for target in "$@"; do cmake --build "build/$san" --target "$target"; done
}

# GCC 12's ThreadSanitizer stops at start-up ("unexpected memory mapping") on
# kernels that randomise mmap more than it expects; then run it without ASLR.
launcher() {  # launcher <sanitizer>: prints a command prefix, or nothing
  [ "$1" = tsan ] || return 0
  local probe
  probe=$(find "build/tsan/tests" -name half_test -type f | head -1)
  [ -n "$probe" ] && ! "$probe" --gtest_list_tests >/dev/null 2>&1 && echo "setarch $(uname -m) -R"
  return 0
}

logic() {  # logic <sanitizer>
  echo "== $1: logic tier =="
  build "$1" tfmpi_logic_tests
  $(launcher "$1") ctest --test-dir "build/$1" --output-on-failure --timeout 600 -j 2 -L logic
}

mpi() {  # mpi <sanitizer>
  echo "== $1: real-MPI tier =="
  build "$1" tfmpi_logic_tests tfmpi_mpi_tests
  # Open MPI has no frame pointers: without slow unwinding the stacks of its
  # leaks stop at its first frame and the suppressions can't match them.
  ASAN_OPTIONS="fast_unwind_on_malloc=0:${ASAN_OPTIONS:-}" $(launcher "$1") \
      ctest --test-dir "build/$1" --output-on-failure --timeout 600 -j 2 -L mpi -LE large
}

python_asan() {
  # Note [Python buffers in flight]: the numpy API over the real engine, with
  # tfmpi's libraries built with ASan. Python itself is not, so libasan (and
  # libstdc++, for ASan's exception interceptors) is preloaded into the ranks
  # only; leak checking is off (the interpreter keeps memory until exit).
  local py
  py=$("${PYTHON:-python3}" -c "import sys; print(sys.executable)")
  echo "== asan: numpy API checks under mpirun -np 2 =="
  PIP_ROOT_USER_ACTION=ignore "$py" -m pip install -q --no-build-isolation --no-deps --upgrade \
      --target build/asan-site . -C build-dir=build/asan-wheel -C cmake.define.TFMPI_ASAN=ON \
      -C cmake.define.TFMPI_BUILD_TF_OPS=OFF
  local mpirun=(mpirun -np 2 --oversubscribe --bind-to none)
  [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
  timeout 600 "${mpirun[@]}" env ASAN_OPTIONS=detect_leaks=0 PYTHONPATH="$PWD/build/asan-site" \
      LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so.6)" \
      "$py" -m pytest -q -p no:cacheprovider --color=no -o "python_files=check_*.py" tests/python/ranks
}

export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export TSAN_OPTIONS="suppressions=$SUPP/tsan.supp:${TSAN_OPTIONS:-}"

case $WHAT in
  all) for san in $SANITIZERS; do logic "$san"; mpi "$san"; done ;;
  logic) for san in $SANITIZERS; do logic "$san"; done ;;
  logic-build) for san in $SANITIZERS; do build "$san" tfmpi_logic_tests; done ;;
  mpi) for san in $SANITIZERS; do mpi "$san"; done ;;
  python) python_asan ;;
  *) echo "usage: scripts/sanitizers.sh [all|logic|logic-build|mpi|python]" >&2; exit 2 ;;
esac
