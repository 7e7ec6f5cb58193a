"""The design notes: every `Note [Name]` block in the sources, and the
references to them and to the docs.

A note is defined where a comment or docstring line of the product (not of
tests or scripts) is `Note [Name]` alone, followed by its text, or, for a
short note that has no such block, where a comment starts `Note [Name]: text`. A
reference is `Note [Name]` anywhere else, in code, docs or the README (a
name may wrap onto the next comment line). docs/architecture.md carries an
index of every note, between the markers below, written by this script.

    python scripts/notes.py            # problems: undefined or twice-defined notes,
                                       # links to docs that do not exist, a stale index
    python scripts/notes.py --write    # rewrite the index in docs/architecture.md

tests/python/test_docs.py fails on any problem this reports.
"""

import argparse
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHITECTURE = "docs/architecture.md"
BEGIN = "<!-- notes index: written by python scripts/notes.py --write -->"
END = "<!-- end of the notes index -->"
# files that speak of notes in general, and name none
ABOUT_NOTES = ("scripts/notes.py", "tests/python/test_docs.py")
SOURCES = ("src", "python", "tests", "bench", "scripts", "docs", "README.md", "CMakeLists.txt")
ALONE = re.compile(r"^\s*(//+|#+)?\s*Note \[([^\]]+)\]\s*$")
INLINE = re.compile(r"^\s*(//+|#+)\s*Note \[([^\]]+)\]:")
# a reference, its name free to wrap onto the next comment line
REFERENCE = re.compile(r"Note\s+\[([^\]]+)\]")
CONTINUATION = re.compile(r"\s*\n\s*(?://+|#+|\*)?\s*")
DOC_LINK = re.compile(r"(?<![\w/.-])((?:docs|bench|tests|scripts|src|python)/[\w./-]+\.md)\b")


def tracked_files():
    out = subprocess.run(["git", "ls-files", *SOURCES], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return [f for f in out.split() if not f.startswith("docs/img/") and f not in ABOUT_NOTES]


def _read(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return None


def _is_definition(lines, i, prefix):
    """A `Note [X]` line alone defines the note when text follows it: a comment
    line after a commented one, any line in a docstring or a doc."""
    if i + 1 >= len(lines):
        return False
    following = lines[i + 1].strip()
    if prefix:
        return following.startswith(prefix) and len(following) > len(prefix)
    return bool(following)


def scan(files=None):
    """(definitions, references): note name -> ["path:line"], name -> {path}.
    A block in tests or scripts defines a note only where the product has
    none (a note about the tests); elsewhere it applies the product's."""
    alone = collections.defaultdict(list)
    inline = collections.defaultdict(list)
    in_tests = collections.defaultdict(list)
    references = collections.defaultdict(set)
    for path in files if files is not None else tracked_files():
        text = _read(path)
        if text is None:
            continue
        lines = text.splitlines()
        product = not path.startswith(("tests/", "scripts/"))
        for i, line in enumerate(lines if not path.endswith(".md") else ()):
            m = ALONE.match(line)
            if m and _is_definition(lines, i, m.group(1)):
                (alone if product else in_tests)[m.group(2)].append(f"{path}:{i + 1}")
            if not product:
                continue
            m = INLINE.match(line)
            if m:
                inline[m.group(2)].append(f"{path}:{i + 1}")
        for m in REFERENCE.finditer(CONTINUATION.sub(" ", text)):
            name = " ".join(m.group(1).split())
            if name != "...":  # the README's way of saying "a note"
                references[name].add(path)
    # "Note [X]: text" defines X where no block does (a short note); beside a
    # block it applies the note there.
    # A note about the tests themselves lives in them.
    definitions = dict(alone)
    for name, places in list(inline.items()) + list(in_tests.items()):
        definitions.setdefault(name, places)
    return definitions, references


def index_text(definitions):
    rows = ["| Note | where |", "|---|---|"]
    for name in sorted(definitions, key=str.lower):
        path = definitions[name][0].rsplit(":", 1)[0]  # no line: edits above it move it
        rows.append(f"| {name} | [{path}](../{path}) |")
    return "\n".join(rows)


def _current_index():
    text = _read(ARCHITECTURE) or ""
    if BEGIN not in text or END not in text:
        return None, text
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip(), text


def problems():
    files = tracked_files()
    definitions, references = scan(files)
    found = []
    for name in sorted(set(references) - set(definitions)):
        found.append(f"Note [{name}] is referred to but defined nowhere "
                     f"(in {', '.join(sorted(references[name])[:3])})")
    for name, places in sorted(definitions.items()):
        if len(places) > 1:
            found.append(f"Note [{name}] is defined {len(places)} times: {', '.join(places)}")
    known = set(files)
    for path in files:
        if not path.endswith((".md", ".py", ".cc", ".h", ".sh")):
            continue
        text = _read(path) or ""
        for m in DOC_LINK.finditer(text):
            if m.group(1) not in known:
                found.append(f"{path} refers to {m.group(1)}, which does not exist")
    current, _ = _current_index()
    if current is None:
        found.append(f"{ARCHITECTURE} has no notes index (markers {BEGIN!r} ... {END!r})")
    elif current != index_text(definitions):
        found.append(f"the notes index in {ARCHITECTURE} is stale: "
                     "run python scripts/notes.py --write")
    return found


def write_index():
    definitions, _ = scan()
    current, text = _current_index()
    if current is None:
        sys.exit(f"{ARCHITECTURE}: no markers {BEGIN!r} ... {END!r} to write between")
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    with open(os.path.join(ROOT, ARCHITECTURE), "w", encoding="utf-8") as f:
        f.write(f"{before}{BEGIN}\n{index_text(definitions)}\n{END}{after}")
    print(f"{ARCHITECTURE}: {len(definitions)} notes indexed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the notes index")
    args = parser.parse_args()
    if args.write:
        write_index()
    found = problems()
    for p in found:
        print(p)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
