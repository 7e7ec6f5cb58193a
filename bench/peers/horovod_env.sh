#!/usr/bin/env bash
# Builds the Horovod side of bench/peers/run.py once and caches it: a virtual
# environment with Horovod 0.28.1 (its last release) on TensorFlow 2.15.1,
# built from PyPI's sources against this machine's MPI. About 5 minutes here
# (2 cores); a second run finds the environment and does nothing.
#   bash bench/peers/horovod_env.sh [FOLDER]
# FOLDER defaults to $TFMPI_PEERS_CACHE/horovod or ~/.cache/tfmpi-peers/horovod.
set -euo pipefail
PYTHON=${PYTHON:-python3}
folder=${1:-${TFMPI_PEERS_CACHE:-$HOME/.cache/tfmpi-peers}/horovod}

if [ -e "$folder/.complete" ]; then
  echo "horovod environment: $folder (already built)"
  exit 0
fi
command -v mpicxx >/dev/null || { echo "horovod environment: mpicxx not found (run scripts/setup.sh --deps-only)" >&2; exit 1; }
# TensorFlow 2.15 has wheels for Python 3.9-3.11 only.
"$PYTHON" -c 'import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 11))' ||
  { echo "horovod environment: TensorFlow 2.15 needs Python 3.9-3.11, $PYTHON is $("$PYTHON" --version)" >&2; exit 1; }

# Built in place (a venv cannot move: its scripts name their own path); the
# stamp file says it is complete, so an interrupted build starts over.
if [ -e "$folder" ] && [ ! -e "$folder/.tfmpi-peers" ]; then
  echo "horovod environment: $folder exists and was not made by this script; not touching it" >&2
  exit 1
fi
rm -rf "$folder"
"$PYTHON" -m venv "$folder"
touch "$folder/.tfmpi-peers"
pip="$folder/bin/python -m pip"
echo "horovod environment: installing TensorFlow 2.15.1 in $folder"
$pip install -q --upgrade pip
# Every later install keeps these versions: Horovod's "tensorflow" extra would
# pull in the newest TensorFlow over 2.15 (hence no extra, and the constraints).
constraints="$folder/constraints.txt"
printf '%s\n' "tensorflow-cpu==2.15.1" "keras<2.16" "numpy<2" > "$constraints"
$pip install -q -c "$constraints" "tensorflow-cpu==2.15.1" "numpy<2" setuptools wheel "cmake<4" \
  packaging psutil pyyaml cloudpickle cffi
echo "horovod environment: building Horovod 0.28.1 (a few minutes)"
# MPI only: no Gloo, no PyTorch, no MXNet; the TensorFlow ops built for 2.15.
HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1 \
HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
PATH="$folder/bin:$PATH" \
  $pip install -q -c "$constraints" --no-build-isolation --no-cache-dir "horovod==0.28.1"
"$folder/bin/python" -c "import tensorflow as tf, horovod.tensorflow as hvd
assert tf.__version__ == '2.15.1', tf.__version__
hvd.init()
assert hvd.mpi_built() and hvd.mpi_enabled()"
touch "$folder/.complete"
echo "horovod environment: $folder"
