#!/usr/bin/env bash
# Installs whatever is missing, then runs the main job: a 2-rank run of the
# engine (fused allreduce of many tensors, then large direct ones) that checks
# the results and prints bandwidth.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
flags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  flags=(--oversubscribe --bind-to none)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
exec timeout 600 mpirun -np "${NP:-2}" "${flags[@]}" "$PYTHON" examples/engine_demo.py
