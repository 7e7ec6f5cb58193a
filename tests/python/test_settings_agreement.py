"""Ranks started with different settings that shape collectives or the math
refuse to start, every one of them, with rank 0 naming what differs (Note
[Settings every rank shares], src/tfmpi/planning/settings_agreement.h).
A per-rank shell line stands in for a host's own start-up file."""

import dataclasses
import sys

import pytest

from mpirun_util import mpirun_command, run

pytestmark = pytest.mark.quick  # the quick tier runs it (scripts/test.sh quick)

RANK = '"${OMPI_COMM_WORLD_RANK:-$PMI_RANK}"'
NUMPY_JOB = ("import os, numpy as np, tfmpi; tfmpi.init(); "  # one write: lines don't interleave
             "os.write(1, f\"SUM {tfmpi.allreduce(np.ones(3, np.float32), op='sum')[0]}\\n\".encode())")
REFERS = "different settings (rank 0 lists them)"


def per_rank(rank, exports, argv):
    """sh -c line: rank `rank` exports `exports`, then every rank runs argv."""
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
    return ["sh", "-c", f"if [ {RANK} = {rank} ]; then export {exports}; fi; exec {quoted}"]


@pytest.mark.parametrize("everyone,rank_2,line", [
    ({"TFMPI_FUSION_THRESHOLD": "64M"}, "TFMPI_FUSION_THRESHOLD=0",
     "TFMPI_FUSION_THRESHOLD: ranks 0, 1 have '67108864'; rank 2 has '0'"),
    # Before the check existed, a rank without heartbeats hung the start-up.
    ({"TFMPI_PEER_TIMEOUT_SECONDS": "45"}, "TFMPI_PEER_TIMEOUT_SECONDS=0",
     "heartbeats (TFMPI_PEER_TIMEOUT_SECONDS > 0): ranks 0, 1 have 'on'; rank 2 has 'off'"),
])
def test_engine_settings_that_differ_stop_every_rank_naming_them(everyone, rank_2, line):
    r = run(mpirun_command(3) + per_rank(2, rank_2, [sys.executable, "-c", NUMPY_JOB]),
            timeout=120, env=everyone)
    assert r.returncode != 0, r.stdout
    assert line in r.stdout, r.stdout
    assert r.stdout.count(REFERS) == 2, r.stdout
    assert "SUM" not in r.stdout, r.stdout


def test_the_same_values_agree_whether_set_or_left_to_the_default():
    # 64M is TFMPI_FUSION_THRESHOLD's default: what counts is the value in effect.
    r = run(mpirun_command(2) + per_rank(1, "TFMPI_FUSION_THRESHOLD=64M",
                                         [sys.executable, "-c", NUMPY_JOB]), timeout=120)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("SUM 2.0") == 2, r.stdout


def test_transparent_settings_that_differ_stop_the_script_before_it_runs():
    code = "print('SCRIPT RAN', flush=True)"
    r = run(["tfmpirun", "-np", "2"] + per_rank(1, "TFMPI_SHARES=equal TF_USE_LEGACY_KERAS=true",
                                                 [sys.executable, "-c", code]),
            timeout=120, env={"TFMPI_SHARES": "adaptive", "TF_USE_LEGACY_KERAS": "0"})
    assert r.returncode != 0, r.stdout
    assert "TFMPI_SHARES: rank 0 has 'adaptive'; rank 1 has 'equal'" in r.stdout, r.stdout
    assert ("TF_USE_LEGACY_KERAS (as TensorFlow reads it): rank 0 has '0'; rank 1 has '1'"
            in r.stdout), r.stdout
    assert r.stdout.count(REFERS) == 1, r.stdout  # rank 1's pointer to rank 0's list
    assert "SCRIPT RAN" not in r.stdout and "Traceback" not in r.stdout, r.stdout


def test_every_option_is_shared_or_the_ranks_own(monkeypatch):
    # A new option must be put in one list or the other (config._SHARED or
    # config.PER_RANK), so a math-shaping one can't be left out of the check.
    from tfmpi.transparent import config

    fields = {f.name for f in dataclasses.fields(config.Options)}
    shared = {field for field, _ in config._SHARED}
    assert not shared & set(config.PER_RANK)
    assert fields == shared | set(config.PER_RANK)


def test_values_are_compared_as_in_effect(monkeypatch):
    from tfmpi.transparent import config

    def settings(**env):
        for name in ("TFMPI_SHARES", "TFMPI_SHARDED_UPDATE", "TFMPI_PROBE_SPEEDS",
                     "TF_USE_LEGACY_KERAS", "TFMPI_SEED"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return dict(config.shared_settings(config.load()))

    base = settings()
    assert "TFMPI_SEED" not in base and "TFMPI_PROBE_SPEEDS" not in base  # unset: "(not set)"
    assert base["TF_USE_LEGACY_KERAS (as TensorFlow reads it)"] == "0"
    assert settings(TFMPI_SHARES=" Auto", TFMPI_SHARDED_UPDATE="no",
                    TF_USE_LEGACY_KERAS="false") == base
    assert settings(TF_USE_LEGACY_KERAS="True") != base
    assert settings(TFMPI_PROBE_SPEEDS="1,2") == settings(TFMPI_PROBE_SPEEDS="1.0, 2.0")
    assert settings(TFMPI_SHARDED_UPDATE="yes")["TFMPI_SHARDED_UPDATE"] == "1"
    assert base["keras version"]  # the installed Keras, read without importing it
