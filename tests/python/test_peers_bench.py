"""The side-by-side benchmark, bench/peers: its table arithmetic, how it stops
jobs that fail or hang, and that its job trains the same model under every
framework it times (the 1-process run, tfmpi on Keras 3 and on tf_keras,
MultiWorkerMirroredStrategy and, where its cached environment exists, Horovod
end with the same weights as one process on the same Keras), so its figures
compare like with like."""

import importlib.util
import json
import os
import signal
import sys

import pytest

from mpirun_util import mpirun_command, run

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "peers")
JOB = os.path.join(BENCH, "job.py")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peers, procs = _load("peers"), _load("procs")

ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
STEPS = ["--steps", "12", "--warmup", "2"]


def result(text):
    lines = [line for line in text.splitlines() if line.startswith("PEERS_RESULT ")]
    assert len(lines) == 1, text[-3000:]  # rank 0 only
    return json.loads(lines[0].split(" ", 1)[1])


def _config(label, n, stack, cores, threads, mean_ms, checksums=None, alone=False, error=None):
    checksums = checksums or [10.0] * len(mean_ms)
    return peers.Config(label, n, stack, cores, threads, alone=alone, error=error,
                        runs=[{"mean_ms": m, "batch": 64, "checksum": c}
                              for m, c in zip(mean_ms, checksums)])


def test_speed_ups_are_over_one_thread_and_the_best_single_process_of_the_same_stack():
    rows = peers.rows([
        _config("1 process, 1 thread", 1, "new", 1, 1, [100, 110, 90], alone=True),
        _config("1 process, 2 threads", 1, "new", 2, 2, [80], alone=True),
        _config("tfmpi", 2, "new", 2, 1, [50, 60], checksums=[10.001, 10.001]),
        _config("1 process, 1 thread (old)", 1, "old", 1, 1, [200], alone=True),
        _config("Horovod", 2, "old", 2, 1, [160, 150, 170], checksums=[10.0] * 3),
        _config("Horovod", 4, "old", 2, 1, [], error="skipped: no environment"),
        _config("MWMS", 4, "new", 2, 1, [100], error="exited with 1")])
    assert rows[0] == ["1 process, 1 thread", "1", "1", "640.0", "100.0, 110.0, 90.0", "1.00",
                       "100%", "0.80", "same"]
    assert rows[1][3:8] == ["800.0", "80.0", "1.25", "62%", "1.00"]
    # median of the mean step times, 55 ms; 1.82x over 1 thread on 2 cores is 91%
    assert rows[2][3:] == ["1163.6", "50.0, 60.0", "1.82", "91%", "1.45", "1e-04"]
    # Horovod against its own stack's single process (200 ms), not the other one
    assert rows[4][3:] == ["400.0", "160.0, 150.0, 170.0", "1.25", "62%", "1.25", "same"]
    assert rows[5] == ["Horovod", "4", "1", "skipped", "skipped: no environment", "-", "-", "-",
                       "-"]
    assert rows[6][4] == "100.0 (then failed: exited with 1)"


def test_option_lists_are_checked():
    assert peers.choices("tfmpi, mwms", ("tfmpi", "mwms"), "--frameworks") == ["tfmpi", "mwms"]
    for text, match in (("tfmpi,mpi", "unknown mpi"), ("tfmpi,,mwms", "comma-separated"),
                        ("tfmpi,tfmpi", "twice")):
        with pytest.raises(ValueError, match=match):
            peers.choices(text, ("tfmpi", "mwms"), "--frameworks")
    assert peers.numbers("1, 2,4", int, "--ranks") == [1, 2, 4]
    for text, match in (("1,x", "--ranks: 'x' is not a number"), ("2,0", "must be positive")):
        with pytest.raises(ValueError, match=match):
            peers.numbers(text, int, "--ranks")


def _python(code):
    return [sys.executable, "-c", code]


def test_a_failing_process_is_named_and_the_others_stopped():
    started = []

    def launch():
        started.extend([procs.spawn(_python("import time; time.sleep(120)")),
                        procs.spawn(_python("import sys; print('bad input'); sys.exit(3)"))])
        return started

    with pytest.raises(procs.JobFailed) as e:
        procs.wait_all(launch, "pair", timeout=100)
    assert "process 1 of 2 exited with 3" in str(e.value) and "bad input" in str(e.value)
    assert started[0].returncode == -signal.SIGTERM  # stopped, not waited for


def test_a_hang_is_stopped_at_the_timeout_with_its_output():
    with pytest.raises(procs.JobFailed, match="still running after 2 s") as e:
        procs.wait_all(lambda: [procs.spawn(_python(
            "import time; print('started', flush=True); time.sleep(60)"))], "sleeper", timeout=2)
    assert "started" in str(e.value)


def test_a_chatty_job_does_not_block_on_its_output():
    out = procs.wait_all(lambda: [procs.spawn(_python(
        "import sys; sys.stderr.write('x' * 300000); print('done')"))], "chatty", timeout=60)
    assert out.strip() == "done"


def test_tf_config_names_every_worker_and_this_one():
    config = json.loads(peers.tf_config(["a:1", "b:2"], 1))
    assert config == {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}


def test_every_framework_trains_the_same_model():
    alone = result(run([sys.executable, JOB, "plain", "tiny", *STEPS], 120, ENV).stdout)
    out = run(["tfmpirun", "-np", "2", sys.executable, JOB, "tfmpi", "tiny", *STEPS], 180,
              {"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert out.returncode == 0, out.stdout[-3000:]
    tfmpi = result(out.stdout)

    addresses = [f"localhost:{p}" for p in peers.free_ports(2)]
    mwms = result(procs.wait_all(lambda: [
        procs.spawn([sys.executable, JOB, "mwms", "tiny", *STEPS],
                    {**os.environ, **ENV, "TF_CONFIG": peers.tf_config(addresses, i)})
        for i in range(2)], "MultiWorkerMirrored", timeout=180))

    legacy = {**ENV, "TF_USE_LEGACY_KERAS": "1"}
    alone_tf_keras = result(run([sys.executable, JOB, "plain-tf.keras", "tiny", *STEPS], 120,
                                legacy).stdout)
    out = run(["tfmpirun", "-np", "2", sys.executable, JOB, "tfmpi-tf.keras", "tiny", *STEPS],
              180, {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1"})
    assert out.returncode == 0, out.stdout[-3000:]
    assert result(out.stdout)["checksum"] == pytest.approx(alone_tf_keras["checksum"], rel=1e-6)

    assert (alone["ranks"], tfmpi["ranks"], mwms["ranks"]) == (1, 2, 2)
    assert tfmpi["steps"] == mwms["steps"] == alone["steps"] == 9
    # 12 Adam steps on the same 16-sample batches: the same weights to float32
    # rounding (a job that skipped the reduction or halved the batch would not be)
    for other in (tfmpi, mwms):
        assert other["checksum"] == pytest.approx(alone["checksum"], rel=1e-6), other



HOROVOD_ENV = os.path.join(os.environ.get("TFMPI_PEERS_CACHE", os.path.expanduser(
    "~/.cache/tfmpi-peers")), "horovod")


@pytest.mark.skipif(not os.path.exists(os.path.join(HOROVOD_ENV, ".complete")),
                    reason=f"no Horovod environment in {HOROVOD_ENV} "
                           "(bash bench/peers/horovod_env.sh builds it)")
def test_horovod_trains_the_same_model_as_one_process_on_its_stack():
    python = os.path.join(HOROVOD_ENV, "bin", "python")
    alone = result(run([python, JOB, "plain-tf2.15", "tiny", *STEPS], 120, ENV).stdout)
    out = run(mpirun_command(2) + ["-x", "TF_NUM_INTRAOP_THREADS", "-x", "TF_NUM_INTEROP_THREADS",
                                   python, JOB, "horovod", "tiny", *STEPS], 180, ENV)
    assert out.returncode == 0, out.stdout[-3000:]
    horovod = result(out.stdout)
    assert (horovod["ranks"], horovod["steps"]) == (2, 9)
    assert horovod["checksum"] == pytest.approx(alone["checksum"], rel=1e-6)
