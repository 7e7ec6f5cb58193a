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
#
# Needs a C++17 compiler, CMake >= 3.20, MPI (Open MPI or MPICH), fmt and
# nlohmann_json: scripts/setup.sh installs them. This script installs nothing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$repo/build/bench}"
nps="${BENCH_NPS:-2 4}"
run_timeout="${BENCH_TIMEOUT:-900}"

missing=()
for tool in cmake mpirun c++; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "bench_engine.sh: missing ${missing[*]}; install the build dependencies first" \
       "(scripts/setup.sh does)." >&2
  exit 1
fi

configure=(cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
           -DTFMPI_BUILD_PYTHON=OFF -DTFMPI_BUILD_BENCH=ON)
# The generator is fixed when the build directory is first configured.
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
  configure+=(-G Ninja)
fi
echo "== configure and build ($build_dir)"
"${configure[@]}" >/dev/null
cmake --build "$build_dir" --target tfmpi_allreduce_bench
bench="$build_dir/bench/tfmpi_allreduce_bench"

launcher=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  launcher+=(--oversubscribe)
  [[ "$(id -u)" == 0 ]] && launcher+=(--allow-run-as-root)
  # Hand the TFMPI_* environment to every rank explicitly.
  for var in $(compgen -e | grep '^TFMPI_' || true); do launcher+=(-x "$var"); done
fi

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
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
