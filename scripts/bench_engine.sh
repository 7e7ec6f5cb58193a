#!/usr/bin/env bash
# Builds and runs the engine benchmark (bench/allreduce_bench.cc) at several
# world sizes, printing its results. See docs/performance.md.
#
# Usage: scripts/bench_engine.sh [benchmark flags...]
#   e.g. scripts/bench_engine.sh --iters 40 --small-iters 500
#        TFMPI_DIRECT_THRESHOLD=256K scripts/bench_engine.sh --only-large
# Environment:
#   BENCH_NPS       world sizes to run (default "2 4"; beyond the core count
#                   they oversubscribe)
#   BUILD_DIR       build directory (default <repo>/build/bench)
#   BENCH_TIMEOUT   seconds allowed per run before it counts as a hang (default 900)
#   TFMPI_*         engine options, passed through to every rank
#   BENCH_SETUP=1   run `scripts/setup.sh --deps-only` first (it installs
#                   missing apt and pip packages); by default nothing is installed
#
# Needs a C++17 compiler, CMake >= 3.20, MPI (Open MPI or MPICH), fmt and
# nlohmann_json, as installed by `scripts/setup.sh --deps-only`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$repo/build/bench}"
nps="${BENCH_NPS:-2 4}"
run_timeout="${BENCH_TIMEOUT:-900}"
setup_hint="run scripts/setup.sh --deps-only (or BENCH_SETUP=1 $0)"

if [[ "${BENCH_SETUP:-0}" == 1 ]]; then
  if [[ ! -x "$repo/scripts/setup.sh" ]]; then
    echo "bench_engine.sh: BENCH_SETUP=1 but scripts/setup.sh is missing" >&2
    exit 1
  fi
  "$repo/scripts/setup.sh" --deps-only
fi

missing=()
for tool in cmake mpirun c++; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "bench_engine.sh: missing ${missing[*]}: $setup_hint" >&2
  exit 1
fi

configure=(cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
           -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_BENCH=ON)
# The generator is fixed when the build directory is first configured.
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
  configure+=(-G Ninja)
fi
echo "== configure and build ($build_dir)"
if ! "${configure[@]}" >/dev/null; then
  echo "bench_engine.sh: CMake configuration failed (a missing dependency?): $setup_hint" >&2
  exit 1
fi
cmake --build "$build_dir" --target tfmpi_allreduce_bench
bench="$build_dir/bench/tfmpi_allreduce_bench"

launcher=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  launcher+=(--oversubscribe)
  [[ "$(id -u)" == 0 ]] && launcher+=(--allow-run-as-root)
  # Hand the TFMPI_* environment to every rank explicitly.
  for var in $(compgen -e | grep '^TFMPI_' || true); do launcher+=(-x "$var"); done
fi

model="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //' || true)"
echo "== machine: $(nproc) cores, ${model:-unknown CPU}," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
status=0
for np in $nps; do
  echo
  echo "== ${launcher[*]} -np $np $bench $*"
  if ! timeout "$run_timeout" "${launcher[@]}" -np "$np" "$bench" "$@"; then
    echo "bench_engine.sh: the run at -np $np failed or timed out (${run_timeout} s)" >&2
    status=1
  fi
done
exit "$status"
