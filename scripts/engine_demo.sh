#!/usr/bin/env bash
# The engine on its own (no TensorFlow): 2 ranks allreduce many small and a few
# large named tensors through the numpy API, check the results, print bandwidth.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
flags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  flags=(--oversubscribe --bind-to none)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
exec timeout 600 mpirun -np "${NP:-2}" "${flags[@]}" "${PYTHON:-python3}" examples/engine_demo.py
