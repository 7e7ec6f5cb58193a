"""Exceptions raised by tfmpi. All derive from TfmpiError."""


class TfmpiError(RuntimeError):
    """Base class of every tfmpi error."""


class NotInitializedError(TfmpiError):
    """A collective was called before tfmpi.init() or after tfmpi.shutdown()."""


class InvalidArgumentError(TfmpiError, ValueError):
    """A call's arguments are unusable (dtype, op, shape, root, duplicate name, parameter)."""


class TensorMismatchError(TfmpiError):
    """Ranks submitted different collectives under one tensor name."""


class AbortedError(TfmpiError):
    """The engine shut down before the collective completed."""


class BatchMismatchError(TfmpiError):
    """Under tfmpirun, the ranks' input pipelines produced different global batches."""


class WeightMismatchError(TfmpiError):
    """Under tfmpirun, the ranks' weights differ after an update: they trained apart."""


class UnsupportedVersionError(TfmpiError):
    """Transparent mode was started with a TensorFlow, Keras or tf_keras outside its tested range."""
