"""Ranks started with different settings that shape collectives or the math
refuse to start, every one of them, with rank 0 naming what differs (Note
[Settings every rank shares], src/tfmpi/planning/settings_agreement.h).
A per-rank shell line stands in for a host's own start-up file."""

import sys

from mpirun_util import mpirun_command, run

RANK = '"${OMPI_COMM_WORLD_RANK:-$PMI_RANK}"'
NUMPY_JOB = ("import os, numpy as np, tfmpi; tfmpi.init(); "  # one write: lines don't interleave
             "os.write(1, f\"SUM {tfmpi.allreduce(np.ones(3, np.float32), op='sum')[0]}\\n\".encode())")


def per_rank(rank, exports, argv):
    """sh -c line: rank `rank` exports `exports`, then every rank runs argv."""
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
    return ["sh", "-c", f"if [ {RANK} = {rank} ]; then export {exports}; fi; exec {quoted}"]


def test_engine_settings_that_differ_stop_every_rank_naming_them():
    r = run(mpirun_command(3) + per_rank(2, "TFMPI_FUSION_THRESHOLD=0",
                                         [sys.executable, "-c", NUMPY_JOB]), timeout=120)
    assert r.returncode != 0, r.stdout
    assert "TFMPI_FUSION_THRESHOLD: ranks 0, 1 have '67108864'; rank 2 has '0'" in r.stdout, r.stdout
    assert r.stdout.count("different settings (rank 0 lists them)") == 2, r.stdout
    assert "SUM" not in r.stdout, r.stdout


def test_the_same_values_agree_whether_set_or_left_to_the_default():
    # 64M is TFMPI_FUSION_THRESHOLD's default: what counts is the value in effect.
    r = run(mpirun_command(2) + per_rank(1, "TFMPI_FUSION_THRESHOLD=64M",
                                         [sys.executable, "-c", NUMPY_JOB]), timeout=120)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("SUM 2.0") == 2, r.stdout


def test_transparent_settings_that_differ_stop_the_script_before_it_runs():
    code = "print('SCRIPT RAN', flush=True)"
    r = run(["tfmpirun", "-np", "2"] + per_rank(1, "TFMPI_SHARES=equal TF_USE_LEGACY_KERAS=1",
                                                 [sys.executable, "-c", code]),
            timeout=120, env={"TFMPI_SHARES": "adaptive"})
    assert r.returncode != 0, r.stdout
    assert "TFMPI_SHARES: rank 0 has 'adaptive'; rank 1 has 'equal'" in r.stdout, r.stdout
    assert "TF_USE_LEGACY_KERAS: rank 0 has (not set); rank 1 has '1'" in r.stdout, r.stdout
    assert "SCRIPT RAN" not in r.stdout and "Traceback" not in r.stdout, r.stdout
