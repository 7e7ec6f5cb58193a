"""The TensorFlow, Keras and tf_keras releases transparent mode is tested
with, and the parts of them (private ones included) that its patches rely on.

Note [Tested versions]
Transparent mode patches Keras and TensorFlow at a few points, some of them
private (keras.src...). Those move between releases, so transparent mode only
starts with releases inside TESTED (CI runs the fidelity tier with the oldest
and the newest Keras 3 minor of the range); outside it, it stops with a
message naming the versions, unless TFMPI_ALLOW_UNTESTED_VERSIONS=1. Whatever
the version, every target of the patches (Note [Patch registry]) and every
other part they read (READS) must exist before the first patch is made: a missing one stops the script at start-up, naming
it, instead of failing in the middle of training. Attributes that only exist
on instances are checked with require_instance where the instance first
reaches transparent mode, before it takes part in a step.
pyproject.toml's extras `tensorflow` and `legacy` state the same ranges
(tests/python/test_versions.py keeps them in step).
"""

import importlib

from tfmpi.errors import UnsupportedVersionError
from tfmpi.transparent import state

# package: (oldest tested, newest tested) as (major, minor)
TESTED = {"tensorflow": ((2, 21), (2, 21)), "keras": ((3, 8), (3, 15)),
          "tf_keras": ((2, 21), (2, 21))}

_DISTRIBUTIONS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
                  "keras": ("keras",), "tf_keras": ("tf-keras", "tf_keras")}

# The parts the patches read without patching them (the patched ones are the
# targets of patch_registry.PATCHES): the gate resolves both (missing()).
READS = {
    "tensorflow": {
        "tensorflow.python.data.ops.dataset_ops": ["DatasetV2._inputs"],
        "tensorflow.python.ops.summary_ops_v2": ["create_noop_writer"],
    },
    "keras": {
        "keras.src.backend.tensorflow.trainer": ["TensorFlowTrainer.train_step",
                                                 "TensorFlowTrainer.test_step"],
        "keras.src.trainers.trainer": ["Trainer.compute_metrics", "Trainer._compute_loss",
                                       "Trainer.compute_loss"],
        "keras.src.trainers.data_adapters.data_adapter_utils": ["unpack_x_y_sample_weight"],
        "keras.src.optimizers.base_optimizer": ["BaseOptimizer.iterations"],
        "keras.src.metrics.metric": ["Metric.stateless_result"],
        "keras.src.losses.loss": ["unscale_loss_for_distribution"],
        "keras.src.utils.python_utils": ["pythonify_logs"],
    },
    "tf_keras": {
        "tf_keras.src.mixed_precision.loss_scale_optimizer": ["BaseLossScaleOptimizer"],
        "tf_keras.src.utils.losses_utils": ["ReductionV2.AUTO"],
        "tf_keras.src.engine.data_adapter": ["unpack_x_y_sample_weight"],
    },
}


OVERRIDE = "TFMPI_ALLOW_UNTESTED_VERSIONS=1"


def _range_text(package):
    (a, b), (c, d) = TESTED[package]
    return f"{a}.{b}" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}"


def installed_version(package):
    import sys
    from importlib.metadata import PackageNotFoundError, version

    module = sys.modules.get(package)
    if getattr(module, "__version__", None):
        return module.__version__
    for distribution in _DISTRIBUTIONS[package]:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    module = importlib.import_module(package)
    return getattr(module, "__version__", "unknown")


def check_version(package, version=None):
    """Raise UnsupportedVersionError if `package` is outside TESTED (and not overridden)."""
    version = version or installed_version(package)
    try:
        minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        minor = None
    low, high = TESTED[package]
    if minor is not None and low <= minor <= high:
        return
    if state.options is not None and state.options.allow_untested_versions:
        return
    raise UnsupportedVersionError(
        f"transparent mode is tested with {package} {_range_text(package)}, and this is "
        f"{package} {version}. Install a tested release (pip install tfmpi's extras "
        f"'tensorflow' / 'legacy' name them), or set {OVERRIDE} to run anyway at your own "
        "risk (the patched Keras/TensorFlow internals may differ).")


def lookup(owner, name):
    """getattr(owner, name), except that a class attribute that only `object`
    provides (an __init__ a release dropped) counts as missing: a patch of it
    would wrap object's."""
    if isinstance(owner, type) and not any(name in c.__dict__ for c in owner.__mro__
                                           if c is not object):
        raise AttributeError(f"{owner.__name__}.{name}")
    return getattr(owner, name)


def _resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = lookup(obj, part)
    return obj


def missing(package):
    """['module: Class.attr', ...] of the patches' targets (patch_registry.resolve)
    and of READS that this installation lacks."""
    from tfmpi.transparent import patch_registry

    out = []
    for patch in patch_registry.of_line(package):
        entry = f"{patch.module}: {patch.path}"
        try:
            patch_registry.resolve(patch)
        except ImportError:
            entry = f"{patch.module} (module)"
        except AttributeError:
            pass
        else:
            continue
        if entry not in out:
            out.append(entry)
    for module_name, attributes in READS[package].items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            out.append(f"{module_name} (module)")
            continue
        for dotted in attributes:
            try:
                _resolve(module, dotted)
            except AttributeError:
                out.append(f"{module_name}: {dotted}")
    return out


def check(package):
    """Version gate, then the parts transparent mode patches; raises with the reason."""
    check_version(package)
    lacking = missing(package)
    if lacking:
        raise UnsupportedVersionError(
            f"{package} {installed_version(package)} lacks what transparent mode patches: "
            f"{', '.join(lacking)}. Use a tested release ({package} {_range_text(package)}).")


def require_instance(obj, attributes, what):
    """Stop with a clear error if `obj` lacks an attribute transparent mode uses."""
    lacking = [a for a in attributes if not hasattr(obj, a)]
    if lacking:
        raise UnsupportedVersionError(
            f"tfmpi: {what} has no {', '.join(lacking)}, which transparent mode relies on; "
            f"this Keras/TensorFlow differs from the tested releases (see docs/transparent.md, "
            "Versions).")
