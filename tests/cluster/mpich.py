"""tfmpi built against MPICH, for the tests that run MPICH's Hydra across emulated hosts.

scripts/mpich.sh installs Debian's mpich and builds tfmpi against it into a virtual
environment (build/mpich-venv, or TFMPI_MPICH_VENV); scripts/test.sh runs it before
the cluster tier. Where either is missing, the tests say so when they skip."""

import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.environ.get("TFMPI_MPICH_VENV", os.path.join(ROOT, "build", "mpich-venv"))


def require():
    """Skips the test, with the reason, unless MPICH and tfmpi built against it are here;
    fails instead where TFMPI_REQUIRE_MPICH=1 (scripts/test.sh, as root, after building it)."""
    reason = None
    if shutil.which("mpiexec.mpich") is None:
        reason = "MPICH is not installed (scripts/mpich.sh installs it; scripts/test.sh runs that)"
    elif not os.access(python(), os.X_OK) or not os.access(tfmpirun(), os.X_OK):
        reason = f"tfmpi is not built against MPICH in {VENV} (scripts/mpich.sh builds it)"
    if reason and os.environ.get("TFMPI_REQUIRE_MPICH") == "1":
        pytest.fail(f"TFMPI_REQUIRE_MPICH=1 but {reason}")
    if reason:
        pytest.skip(reason)


def python():
    return os.path.join(VENV, "bin", "python")


def tfmpirun():
    return os.path.join(VENV, "bin", "tfmpirun")


def launch_args(cluster):
    """tfmpirun (MPICH's build) with MPICH's mpiexec across the cluster's hosts."""
    return [tfmpirun(), "--mpirun", shutil.which("mpiexec.mpich"),
            *cluster.tfmpirun_args(mpich=True)]
