"""Reading back what rank 0 wrote, without a shared filesystem.

Note [Reading rank 0's files]
Only rank 0 writes files (Note [Rank-0 sections], rank0.py), and the hosts of
a cluster need not share a filesystem, so a rank other than 0 may find no file
where the script loads one, or an old one. Every load of a model, of weights
or of a checkpoint therefore reads rank 0's copy: rank 0 packs the files that
make up the path (the file itself; every file under a directory; a TensorFlow
checkpoint prefix's `prefix.*` files and the `checkpoint` file beside them)
into an in-memory tar archive, broadcasts it, and every other rank unpacks it
into a private temporary folder and loads from there. Where rank 0 has nothing
at the path, the others load from a path that does not exist either, so every
rank fails the way rank 0 does. The copies live until the process exits
(checkpoints may be restored lazily, after the load returns).
"""

import atexit
import functools
import glob
import inspect
import io
import os
import pickle
import shutil
import tarfile
import tempfile

from tfmpi.transparent import flags, rank0, state

_folders = []


def inside():
    """True while a load that already reads rank 0's files runs."""
    return flags.active("shipping")


def section():
    return flags.inside("shipping")


def _members(path):
    """(folder the archive is relative to, [files]) that make up `path` on this host."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if os.path.isdir(path):
        files = [os.path.join(root, f) for root, _, names in os.walk(path) for f in names]
        return parent, sorted(files)
    if os.path.isfile(path):
        return parent, [path]
    files = sorted(glob.glob(glob.escape(path) + ".*"))  # a TensorFlow checkpoint prefix
    if files and os.path.isfile(os.path.join(parent, "checkpoint")):
        files.append(os.path.join(parent, "checkpoint"))
    return parent, files


def _pack(path):
    name = os.path.basename(os.path.abspath(path))
    parent, files = _members(path)
    if not files and not os.path.isdir(path):
        return pickle.dumps(("missing", (name, None)))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if os.path.isdir(path):
            tar.add(path, arcname=os.path.relpath(os.path.abspath(path), parent), recursive=False)
        for f in files:
            tar.add(f, arcname=os.path.relpath(f, parent), recursive=False)
    return pickle.dumps(("files", (name, buffer.getvalue())))


def _cleanup():
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)


def _is_path(path):
    return isinstance(path, (str, os.PathLike))


def local_copy(path):
    """What this rank loads for rank 0's `path`. Collective. Rank 0 gets its
    own argument back; the others a local copy of rank 0's files, or their own
    argument where rank 0's is not a path (a file object, None)."""
    if state.size == 1:
        return path
    payload = None
    if state.rank == 0:
        try:
            payload = _pack(os.fspath(path)) if _is_path(path) else pickle.dumps(("as-is", None))
        except Exception as e:  # the others must hear of it too
            payload = pickle.dumps(("error", e))
    payload = rank0.broadcast_bytes(payload, "files")
    kind, value = pickle.loads(payload)
    if state.rank == 0:
        if kind == "error":
            raise value
        return path
    if kind == "as-is":
        return path
    if kind == "error":
        value.add_note("tfmpi: raised on rank 0 while reading the files to load; every rank raises it")
        raise value
    if not _folders:
        atexit.register(_cleanup)
    folder = tempfile.mkdtemp(prefix="tfmpi-rank0-files-")
    _folders.append(folder)
    name, archive = value
    if archive is not None:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
            tar.extractall(folder, filter="data")
    return os.path.join(folder, name)


def reads(original, path_arg):
    """`original`, a loader whose argument `path_arg` names what it reads,
    made to read rank 0's copy (Note [Reading rank 0's files])."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if state.size == 1 or inside() or rank0.inside():
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.arguments[path_arg] = local_copy(bound.arguments.get(path_arg))
        with section():
            return original(*bound.args, **bound.kwargs)

    wrapper._tfmpi_wrapped = True
    return wrapper
