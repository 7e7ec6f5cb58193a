"""Run under tfmpirun: imports TensorFlow and a Keras line (tf_keras when
TF_USE_LEGACY_KERAS=1), so transparent mode installs its patches, then finds
every attribute of TensorFlow's and Keras' modules and classes whose value is
transparent mode's code and writes, to OUT_DIR/rank-<r>.json:
  "undeclared": the patched attributes that no record of the registry covers;
  "applied": the targets of the registry's records whose value is ours."""

import inspect
import json
import os
import sys

import tensorflow as tf  # noqa: F401  (installs the TensorFlow patches)

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras  # noqa: F401
    LINE = "tf_keras"
else:
    import keras  # noqa: F401
    LINE = "keras"

from tfmpi.transparent import patch_registry, state  # noqa: E402

PACKAGES = ("tensorflow", "keras", "tf_keras")


def patched_attributes():
    """(module name, attribute path, value, owning class or None) of every patched attribute."""
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in PACKAGES:
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if inspect.isclass(value):
                if value.__module__ != name:
                    continue
                for key, member in list(value.__dict__.items()):
                    if patch_registry.is_ours(member):
                        yield name, f"{value.__qualname__}.{key}", member, value
            elif callable(value) and patch_registry.is_ours(value):
                yield name, attr, value, None


undeclared = sorted({f"{m}:{p}" for m, p, v, owner in patched_attributes()
                     if not patch_registry.covering(m, p, v, owner)})
applied = []
for record in patch_registry.PATCHES:
    if record.line not in ("tensorflow", LINE):
        continue
    try:
        _, _, value = patch_registry.resolve(record)
    except (ImportError, AttributeError):
        continue
    if patch_registry.is_ours(value):
        applied.append(record.target)
with open(os.path.join(sys.argv[1], f"rank-{state.rank}.json"), "w") as f:
    json.dump({"undeclared": undeclared, "applied": sorted(set(applied))}, f)
