"""The patch registry (Note [Patch registry],
python/tfmpi/transparent/patch_registry.py) is the whole truth about what
transparent mode changes in TensorFlow and Keras:

- under tfmpirun, on both Keras lines and under every option that adds
  patches, every attribute whose value is transparent mode's code is covered
  by a record, and every record is applied in one of those runs;
- the version gate resolves every record's target: any one of them taken
  away from the installed packages is named by it (and start-up stops on
  what the gate names: test_versions.py);
- docs/patches.md is what `python -m tfmpi.patches --markdown` writes.
"""

import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys

import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="the patches are TensorFlow's and Keras'")

from tfmpi.transparent import patch_registry, versions  # noqa: E402

pytestmark = pytest.mark.quick  # the quick tier runs it (scripts/test.sh quick)

ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "scripts", "patched_points.py")
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}
LEGACY = {"TF_USE_LEGACY_KERAS": "1"}
# the options that add patches: per-rank mode (TFEpochIterator.reset), the sharded
# update (slot records), the proof kit's compare run (layer calls, steps)
MORE = {"TFMPI_BATCH_MODE": "per-rank", "TFMPI_SHARDED_UPDATE": "1", "TFMPI_VERIFY": "compare"}


def _patched(tmp_path, env):
    out = tmp_path / "out"
    out.mkdir(parents=True)
    if env.get("TFMPI_VERIFY"):
        env = {**env, "TFMPI_VERIFY_DIR": str(tmp_path / "verify")}
        (tmp_path / "verify" / "reference").mkdir(parents=True)
    r = run(["tfmpirun", "-np", "2", sys.executable, SCRIPT, str(out)], timeout=300,
            env={**QUIET, **env})
    assert r.returncode == 0, r.stdout
    return [json.load(open(out / f"rank-{rank}.json")) for rank in (0, 1)]


@pytest.mark.parametrize("line", ["keras", "tf_keras"])
def test_every_patch_is_declared_and_every_record_applied(line, tmp_path):
    pytest.importorskip(line, reason=f"{line} is not installed (scripts/setup.sh installs it)")
    env = LEGACY if line == "tf_keras" else {}
    found = (_patched(tmp_path / "default", env)
             + _patched(tmp_path / "more", {**env, **MORE}))
    undeclared = sorted({u for f in found for u in f["undeclared"]})
    assert not undeclared, f"patched but declared by no record: {undeclared}"
    applied = {a for f in found for a in f["applied"]}
    declared = {p.target for p in patch_registry.PATCHES if p.line in ("tensorflow", line)}
    assert not declared - applied, f"declared but never applied: {sorted(declared - applied)}"


def _take_away(patch, monkeypatch):
    """Remove `patch`'s target as a release without it would lack it."""
    owner, name, _ = patch_registry.resolve(patch)
    if patch.holds == "added":  # the patch adds the attribute: its class goes
        module = importlib.import_module(patch.module)
        monkeypatch.delattr(module, patch.path.split(".")[0])
    elif inspect.isclass(owner):  # every definition but object's
        for cls in owner.__mro__:
            if cls is not object and name in cls.__dict__:
                monkeypatch.delattr(cls, name)
    else:
        monkeypatch.delattr(owner, name)


def _targets_of_installed_lines():
    out = []
    for line in patch_registry.LINES:
        if importlib.util.find_spec(line) is None:
            continue
        seen = set()
        for p in patch_registry.of_line(line):
            if p.target not in seen:
                seen.add(p.target)
                out.append(p)
    return out


def test_the_installed_releases_have_every_target():
    for line in patch_registry.LINES:
        if importlib.util.find_spec(line) is not None:
            assert versions.missing(line) == [], line


@pytest.mark.parametrize("patch", _targets_of_installed_lines(), ids=lambda p: p.target)
def test_a_target_taken_away_is_named_by_the_gate(patch, monkeypatch):
    if patch.line == "tf_keras":
        monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    _take_away(patch, monkeypatch)
    assert f"{patch.module}: {patch.path}" in versions.missing(patch.line)


def test_docs_patches_md_is_current():
    r = subprocess.run([sys.executable, "-m", "tfmpi.patches", "--markdown"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, **QUIET})
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "docs", "patches.md")) as f:
        assert f.read() == r.stdout, ("docs/patches.md is stale: python -m tfmpi.patches "
                                      "--markdown > docs/patches.md")


def test_the_inventory_says_every_target_resolves():
    r = subprocess.run([sys.executable, "-m", "tfmpi.patches"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, **QUIET})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MISSING" not in r.stdout
    assert r.stdout.count("  ok ") == sum(
        len(patch_registry.of_line(line)) for line in patch_registry.LINES
        if importlib.util.find_spec(line) is not None), r.stdout


def test_an_override_a_release_drops_is_named_though_a_base_still_has_it(monkeypatch):
    # BackupAndRestore.on_train_end without its own definition would fall back to
    # Callback's no-op: wrapping that on BackupAndRestore would silently change what runs.
    pytest.importorskip("keras", reason="keras is not installed")
    from keras.src.callbacks import backup_and_restore

    monkeypatch.delattr(backup_and_restore.BackupAndRestore, "on_train_end")
    assert hasattr(backup_and_restore.BackupAndRestore, "on_train_end")  # the base's
    assert ("keras.src.callbacks.backup_and_restore: BackupAndRestore.on_train_end"
            in versions.missing("keras"))
