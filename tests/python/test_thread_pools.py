"""Ranks that share a host share its cores (Note [Threads per rank],
src/tfmpi/planning/threads.h; python/tfmpi/transparent/threads.py): under
tfmpirun each rank's TensorFlow pools are sized to its part of the host,
unless the user sized them; binding hands out disjoint CPUs; bad values are
refused at start-up."""

import json
import os
import shutil
import subprocess

import pytest

pytest.importorskip("tensorflow", reason="the thread-pool tests run TensorFlow under tfmpirun")

# Writes this rank's view to OUT_DIR/view-<pid>.json (files, not stdout: the
# ranks' lines can interleave): the variables, its CPUs, and the compute
# threads TensorFlow started after running a small graph.
SCRIPT = r"""
import collections, json, os, sys
import tensorflow as tf
x = tf.random.normal((256, 256))
@tf.function
def f(x):
    return tf.matmul(x, x) + tf.matmul(x, x)
for _ in range(3):
    f(x)
names = collections.Counter(open(f"/proc/self/task/{t}/comm").read().strip()
                            for t in os.listdir("/proc/self/task"))
view = json.dumps({
    "intra": os.environ.get("TF_NUM_INTRAOP_THREADS"),
    "inter": os.environ.get("TF_NUM_INTEROP_THREADS"),
    "omp": os.environ.get("OMP_NUM_THREADS"),
    "cpus": sorted(os.sched_getaffinity(0)),
    "compute_threads": names.get("tf_Compute", 0)})
with open(os.path.join(sys.argv[1], f"view-{os.getpid()}.json"), "w") as f:
    f.write(view)
"""

CPUS = len(os.sched_getaffinity(0))


def _views(tmp_path, np_, env=None):
    script = tmp_path / "view.py"
    script.write_text(SCRIPT)
    exe = shutil.which("tfmpirun")
    assert exe, "tfmpirun is not on PATH: install tfmpi (pip install --no-build-isolation .)"
    full = {k: v for k, v in os.environ.items()
            if k not in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")}
    full.update({"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    try:
        out = tmp_path / f"views-{len(list(tmp_path.iterdir()))}"
        out.mkdir()
        r = subprocess.run([exe, "-np", str(np_), "python", str(script), str(out)],
                           capture_output=True, text=True, timeout=240, env=full)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"tfmpirun -np {np_} timed out (a hang)") from e
    assert r.returncode == 0, r.stdout + r.stderr
    views = [json.loads(p.read_text()) for p in sorted(out.glob("view-*.json"))]
    assert len(views) == np_, (r.stdout, r.stderr)
    return views, r.stderr


def test_ranks_on_one_host_split_its_cores(tmp_path):
    views, stderr = _views(tmp_path, 2)
    sizes = [int(v["intra"]) for v in views]
    assert all(s >= 1 for s in sizes), views
    assert sum(sizes) == max(CPUS, 2), views  # the cores, or one each on a 1-core host
    assert [int(v["inter"]) for v in views] == sizes and [int(v["omp"]) for v in views] == sizes
    assert "rank 0's thread pools:" in stderr and "2 ranks on this host" in stderr, stderr


def test_sized_ranks_start_fewer_compute_threads_than_tensorflow_defaults(tmp_path):
    if CPUS < 2:
        pytest.skip("needs 2 CPUs: on 1 CPU TensorFlow's default is already one thread")
    sized, _ = _views(tmp_path, 2)
    default, _ = _views(tmp_path, 2, {"TFMPI_THREADS": "off"})
    assert all(v["intra"] is None for v in default), default  # off: nothing set
    assert max(v["compute_threads"] for v in sized) < min(v["compute_threads"] for v in default), \
        (sized, default)


def test_variables_the_user_set_are_kept(tmp_path):
    views, stderr = _views(tmp_path, 2, {"TF_NUM_INTRAOP_THREADS": "3"})
    assert [v["intra"] for v in views] == ["3", "3"], views
    assert all(v["inter"] is not None for v in views), views
    assert "kept the user's TF_NUM_INTRAOP_THREADS" in stderr, stderr


def test_binding_gives_each_rank_its_own_cpus(tmp_path):
    if CPUS < 2:
        pytest.skip("needs 2 CPUs to give two ranks disjoint CPUs")
    views, _ = _views(tmp_path, 2, {"TFMPI_BIND_CORES": "1"})
    a, b = (set(v["cpus"]) for v in views)
    assert a and b and not (a & b), views
    assert len(a) == int(views[0]["intra"]) and len(b) == int(views[1]["intra"]), views


@pytest.mark.parametrize("name,value", [("TFMPI_THREADS", "many"), ("TFMPI_BIND_CORES", "maybe")])
def test_a_bad_value_is_refused_naming_the_variable(tmp_path, name, value):
    script = tmp_path / "nothing.py"
    script.write_text("print('RAN')\n")
    r = subprocess.run([shutil.which("tfmpirun"), "-np", "2", "python", str(script)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, name: value})
    assert r.returncode != 0 and "RAN" not in r.stdout, r.stdout
    assert name in r.stderr and repr(value) in r.stderr, r.stderr
