"""The tested version range (Note [Tested versions],
python/tfmpi/transparent/versions.py): declared once, stated the same in
pyproject.toml, enforced when transparent mode starts, with an override; and
whatever the version, a Keras that lacks a part the patches need stops the
script at start-up, naming the part."""

import os
import re
import sys

import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="transparent mode needs TensorFlow")

from tfmpi.transparent import versions  # noqa: E402

pytestmark = pytest.mark.quick  # the quick tier runs it (scripts/test.sh quick)

ROOT = os.path.dirname(os.path.dirname(HERE))
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def _extra(name):
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    found = re.search(rf"^{name} = \[(.*?)\]", text, re.M | re.S)
    assert found, f"pyproject.toml has no extra '{name}'"
    return found.group(1)


@pytest.mark.parametrize("package,extra,distribution",
                         [("tensorflow", "tensorflow", "tensorflow-cpu"),
                          ("keras", "tensorflow", "keras"), ("tf_keras", "legacy", "tf-keras")])
def test_pyproject_states_the_tested_range(package, extra, distribution):
    (a, b), (c, d) = versions.TESTED[package]
    assert f'"{distribution}>={a}.{b},<{c}.{d + 1}"' in _extra(extra)


@pytest.mark.parametrize("package", sorted(versions.READS))
def test_every_part_the_patches_need_resolves(package):
    # Run by the quick tier with the newest Keras here and the oldest in its venv.
    pytest.importorskip(package, reason=f"{package} is not installed")
    assert versions.missing(package) == []


def test_the_installed_releases_are_inside_the_range():
    for package in versions.TESTED:
        pytest.importorskip(package, reason=f"{package} is not installed")
        versions.check(package)  # raises if not


STAND_IN = """
import sys
sys.path.insert(0, sys.argv[1])
import keras
print("IMPORTED", keras.__version__, flush=True)
"""


def _stand_in_keras(tmp_path, version):
    (tmp_path / "keras").mkdir()
    (tmp_path / "keras" / "__init__.py").write_text(f'__version__ = "{version}"\n')


def test_keras_outside_the_range_is_refused_at_start(tmp_path):
    _stand_in_keras(tmp_path, "3.7.0")
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", STAND_IN, str(tmp_path)], 120, env=QUIET)
    assert r.returncode == 2, r.stdout
    assert "transparent mode is tested with keras 3.8 to 3.15, and this is keras 3.7.0" in r.stdout
    assert "TFMPI_ALLOW_UNTESTED_VERSIONS=1" in r.stdout
    assert "IMPORTED" not in r.stdout


def test_override_still_refuses_a_keras_without_the_patched_parts(tmp_path):
    _stand_in_keras(tmp_path, "3.7.0")
    r = run(["tfmpirun", "-np", "2", sys.executable, "-c", STAND_IN, str(tmp_path)], 120,
            env={**QUIET, "TFMPI_ALLOW_UNTESTED_VERSIONS": "1"})
    assert r.returncode == 2, r.stdout
    assert "keras 3.7.0 lacks what transparent mode patches" in r.stdout, r.stdout
    assert "keras.src.backend.tensorflow.trainer (module)" in r.stdout
    assert "IMPORTED" not in r.stdout
