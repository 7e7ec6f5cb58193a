"""The inventory of transparent mode's patches (Note [Patch registry],
tfmpi/transparent/patch_registry.py).

    python -m tfmpi.patches              every patch, and whether the installed
                                         TensorFlow / Keras / tf_keras have its target
    python -m tfmpi.patches --markdown   docs/patches.md (no installed versions in it)

Exit status 1 when an installed package lacks a target.
"""

import argparse
import importlib.util
import sys

from tfmpi.transparent import patch_registry

TITLES = {"tensorflow": "TensorFlow", "keras": "Keras 3", "tf_keras": "tf_keras (Keras 2)"}
REACH = {"": "", "subclasses": "and every subclass that defines it",
         "re-exports": "under every public name", "classes": "in every public class"}


def markdown():
    from tfmpi.transparent import versions

    out = ["# Patches", "",
           "Every change transparent mode makes to TensorFlow, Keras 3 and tf_keras, one row "
           "per target (Note [Patch registry], `python/tfmpi/transparent/patch_registry.py`). "
           "Start-up resolves every target of a line before its first patch and stops, naming "
           "the target, where a release lacks one. Written by "
           "`python -m tfmpi.patches --markdown > docs/patches.md`; a test fails when this "
           "file is stale.", ""]
    for line in patch_registry.LINES:
        records = patch_registry.of_line(line)
        (a, b), (c, d) = versions.TESTED[line]
        out += [f"## {TITLES[line]}", "",
                f"{len(records)} patches; tested with {line} {a}.{b} to {c}.{d}.", "",
                "| target | installed by | what for | note | when |", "|---|---|---|---|---|"]
        for p in records:
            reach = f" ({REACH[p.reach]})" if p.reach else ""
            note = f"[{p.note}]" if p.note else ""
            out.append(f"| `{p.target}`{reach} | `{p.by}` | {p.purpose} | {note} | "
                       f"{p.when or 'more than one rank'} |")
        out.append("")
    return "\n".join(out)


def inventory():
    """Lines of text, and whether every installed line has all its targets."""
    from tfmpi.transparent import versions

    lines, complete = [], True
    for line in patch_registry.LINES:
        if importlib.util.find_spec(line) is None:
            lines.append(f"{TITLES[line]}: not installed")
            continue
        lacking = set(versions.missing(line))
        (a, b), (c, d) = versions.TESTED[line]
        lines.append(f"{TITLES[line]} {versions.installed_version(line)} "
                     f"(tested {a}.{b} to {c}.{d}):")
        declared = set()
        for p in patch_registry.of_line(line):
            entries = (f"{p.module}: {p.path}", f"{p.module} (module)")
            declared.update(entries)
            missing = any(entry in lacking for entry in entries)
            complete &= not missing
            status = "MISSING" if missing else "ok"
            reach = f" ({REACH[p.reach]})" if p.reach else ""
            lines.append(f"  {status:7} {p.target}{reach}  [{p.by}] {p.purpose}")
        for entry in sorted(lacking - declared):  # parts read, not patched (versions.READS)
            lines.append(f"  MISSING {entry} (read by the patches)")
            complete = False
    return lines, complete


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print docs/patches.md")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0
    text, complete = inventory()
    print("\n".join(text))
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
