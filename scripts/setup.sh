#!/usr/bin/env bash
# Installs whatever is missing for tfmpi on Debian (apt and pip packages), then
# builds and installs tfmpi itself. Idempotent: a second run only rebuilds
# what changed.
#   scripts/setup.sh              everything
#   scripts/setup.sh --deps-only  system and Python dependencies, not tfmpi
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

APT_PACKAGES=(g++ pkg-config openmpi-bin libopenmpi-dev libgtest-dev googletest
              nlohmann-json3-dev libfmt-dev libcli11-dev robin-map-dev dataset-fashion-mnist
              iproute2 util-linux libhdf5-dev libnetcdf-dev)
# TensorFlow must be importable when tfmpi builds: its ops compile against it.
# ml_dtypes (TensorFlow's bfloat16 and float8 types, any 0.5.1 <= version < 1
# for TensorFlow 2.21): below 0.7, whose import registers its numpy loops in
# quadratic time. Measured here: 0.65 s of CPU to import 0.7.0, 0.01 s for 0.6.0
# (about an eighth of `import tensorflow, keras`), paid by every rank at start.
PIP_PACKAGES=("scikit-build-core>=0.10" "pybind11>=2.10" "cmake>=3.20" ninja "numpy>=1.22"
              "pytest>=7" "tensorflow-cpu>=2.21,<2.22" "ml_dtypes>=0.5.1,<0.7"
              "keras>=3.8,<3.16" scikit-learn h5py netCDF4)

bash scripts/apt_install.sh "${APT_PACKAGES[@]}"

"$PYTHON" -c "import packaging" 2>/dev/null || "$PYTHON" -m pip install -q packaging
pip_missing=()
for spec in "${PIP_PACKAGES[@]}"; do
  "$PYTHON" - "$spec" <<'PY' || pip_missing+=("$spec")
import sys
from importlib.metadata import version, PackageNotFoundError
from packaging.requirements import Requirement
req = Requirement(sys.argv[1])
try:
    sys.exit(0 if req.specifier.contains(version(req.name), prereleases=True) else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
done
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "tfmpi setup: installing Python packages: ${pip_missing[*]}"
  "$PYTHON" -m pip install -q "${pip_missing[@]}"
fi

# tf_keras (TF_USE_LEGACY_KERAS=1) must match TensorFlow's minor version. Its
# wheel requires the `tensorflow` package, which tensorflow-cpu already
# provides under another name, hence --no-deps.
tf_minor=$("$PYTHON" -c "from importlib.metadata import version; print('.'.join(version('tensorflow-cpu').split('.')[:2]))")
if ! "$PYTHON" -c "from importlib.metadata import version; import sys; sys.exit(version('tf-keras').startswith('$tf_minor.') is False)" 2>/dev/null; then
  echo "tfmpi setup: installing tf-keras==$tf_minor.*"
  "$PYTHON" -m pip install -q --no-deps "tf-keras==$tf_minor.*"
fi

[ "${1:-}" = "--deps-only" ] && exit 0

echo "tfmpi setup: building and installing tfmpi (incremental)"
# No build isolation: the build uses the packages installed above, and the
# build directory (build/<wheel tag>) is kept, so rebuilds are incremental.
# PIP_ROOT_USER_ACTION: no warning about running as root; a failed build fails here.
PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install -q --no-build-isolation --no-deps .
"$PYTHON" -c "import tfmpi._core" || { echo "tfmpi setup: the build did not install" >&2; exit 1; }
TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" -c "import tfmpi.tensorflow" 2>/dev/null ||
  { echo "tfmpi setup: the TensorFlow ops did not build or load" >&2; exit 1; }
