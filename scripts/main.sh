#!/usr/bin/env bash
# Installs whatever is missing, then runs the main job: the plain Keras CNN in
# examples/fashion_mnist_cnn.py (no tfmpi import) trained data-parallel on 2
# MPI ranks by tfmpirun, on the Fashion-MNIST files Debian's
# dataset-fashion-mnist package installs. Prints the progress bar (rank 0) and
# the final test accuracy.
#   NP=4 EPOCHS=3 scripts/main.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
exec timeout 1800 tfmpirun -np "${NP:-2}" "$PYTHON" examples/fashion_mnist_cnn.py \
  --epochs "${EPOCHS:-2}"
