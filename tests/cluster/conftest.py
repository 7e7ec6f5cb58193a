"""Tests of the emulated-cluster harness. Those that build a cluster need root, network
namespaces, a cgroup CPU controller and Open MPI; elsewhere they are skipped with the
reason (CI runs them as root)."""

import os
import shutil
import subprocess

import pytest

import harness


@pytest.fixture
def need_cluster():
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")


@pytest.fixture
def need_bandwidth(need_cluster):
    reason = harness.bandwidth_unavailable_reason()
    if reason:
        pytest.skip(f"link bandwidth cannot be limited: {reason}")


@pytest.fixture(scope="session")
def mpi_report(tmp_path_factory):
    """The tiny MPI program mpi_report.c, compiled with mpicc."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        pytest.skip("no mpicc (install libopenmpi-dev) to build the MPI test program")
    out = str(tmp_path_factory.mktemp("mpi") / "mpi_report")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_report.c")
    proc = subprocess.run([mpicc, "-O1", "-o", out, source], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out
