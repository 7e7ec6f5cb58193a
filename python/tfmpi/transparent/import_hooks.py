"""Patch TensorFlow and Keras right after the script imports them (importing
them at start-up would slow every Python process tfmpirun starts)."""

import importlib
import importlib.abc
import sys


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, after):
        self._inner = inner
        self._after = after

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._after(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, hooks):
        self._hooks = hooks  # module name -> callable(module), run once

    def find_spec(self, fullname, path, target=None):
        if fullname not in self._hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None:
            return spec
        # The hook is taken when the module runs, not here: find_spec alone
        # (importlib.util.find_spec, as TensorFlow does for Keras) loads nothing.
        spec.loader = _Loader(spec.loader, lambda module: self._run(fullname, module))
        return spec

    def _run(self, fullname, module):
        hook = self._hooks.pop(fullname, None)
        if hook is not None:
            hook(module)


# TensorFlow imports Keras while it initialises itself, so a Keras hook can
# run before TensorFlow is usable: that Keras is then patched when
# TensorFlow's import completes.
_waiting = []  # installers of Keras packages imported before TensorFlow was ready
_tensorflow_ready = False


def _guarded(what, fn):
    try:
        fn()
    except Exception as e:  # never train unsynchronised: stop with the reason
        sys.stderr.write(f"tfmpi: could not turn on transparent mode ({what}): "
                         f"{type(e).__name__}: {e}\n")
        raise SystemExit(2)


def _on_tensorflow(module):
    global _tensorflow_ready
    from tfmpi.transparent import tf_patches

    _guarded("TensorFlow patches", lambda: tf_patches.install(module))
    _tensorflow_ready = True
    while _waiting:
        _waiting.pop(0)()


def _patcher(what, module_name):
    """Installs the patches of tfmpi.transparent.<module_name> (each import hook
    runs once, so each set is installed once)."""
    def install():
        patches = importlib.import_module(f"tfmpi.transparent.{module_name}")
        _guarded(what, patches.install)

    return install


def _when_tensorflow_ready(install):
    def hook(module):
        if _tensorflow_ready or "tensorflow" not in sys.modules:
            install()
        else:
            _waiting.append(install)

    return hook


def install():
    hooks = {"tensorflow": _on_tensorflow,
             "keras": _when_tensorflow_ready(_patcher("Keras patches", "keras_patches")),
             "tf_keras": _when_tensorflow_ready(_patcher("tf_keras patches", "legacy_keras"))}
    for name in list(hooks):
        if name in sys.modules:  # already imported: patch now
            hooks.pop(name)(sys.modules[name])
    sys.meta_path.insert(0, _Finder(hooks))
