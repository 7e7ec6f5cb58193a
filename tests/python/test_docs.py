"""The design notes and the docs hold together: every `Note [...]` referred to
is defined once, every docs/... path named exists, and the notes index in
docs/architecture.md is current (scripts/notes.py)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.quick  # the quick tier runs it (scripts/test.sh quick)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_notes_and_doc_references_resolve():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "notes.py")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_check_sees_a_note_that_does_not_exist(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import notes
    finally:
        sys.path.pop(0)
    missing = "No such " + "note"  # spelled apart: the check reads this file too
    path = tmp_path / "probe.py"
    path.write_text(f"x = 1  # Note [{missing}]\n")
    definitions, references = notes.scan([str(path)])
    assert missing in references and missing not in definitions
