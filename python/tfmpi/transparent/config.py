"""Options of transparent mode, from TFMPI_* variables set by tfmpirun (or by hand)."""

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Options:
    batch_mode: str = "global"       # "global": split each batch; "per-rank": each rank takes its own batches
    all_ranks_output: bool = False   # ranks other than 0 print too
    sync_batchnorm: bool = True      # BatchNormalization moments over the global batch (batchnorm.py)
    seed: int = None                 # shared seed (tfmpirun picks one per launch)
    batch_check_interval: int = 100  # compare batch fingerprints every this many steps (0: never)
    allow_untested_versions: bool = False  # start even outside the tested version range
    shares: str = "auto"             # "adaptive": slices follow measured speeds; "equal": B // N each;
                                     # "auto": resolve_shares picks one when the job starts
    rebalance_steps: int = 10        # adaptive shares are revised every this many steps (0: never)
    input_sharding: bool = True      # each rank decodes only its slices' samples (input_sharding.py)
    data_sharding: str = "elements"  # "files": each rank reads only its files (file_sharding.py)
    threads: str = "auto"            # "auto": thread pools sized to the rank's part of its host (threads.py)
    bind_cores: bool = False         # each rank keeps only its own CPUs (threads.py)
    gradient_buckets: int = 0        # bytes per gradient allreduce in backward order; 0: one (collectives.py)
    sharded_update: bool = False     # each rank updates only the variables it owns (sharded_update.py)
    shares_verbose: bool = False     # rank 0 prints each change of the slice sizes (shares.py)
    fused_updates: bool = True       # Keras' Adam and SGD updates in one kernel, bit for bit (fused_updates.py)
    verify: str = "off"              # "reference" / "compare": a run of tfmpirun --verify (verify.py)
    verify_dir: str = ""             # where the 1-process run's records are (verify.py)
    verify_steps: int = 20           # training steps a --verify run compares


# Every TFMPI_* variable transparent mode reads (the engine's own are in its
# registry, python -m tfmpi.params): name, default, meaning. `python -m
# tfmpi.params` lists them; a variable set under a name close to one of these
# or the engine's is reported as a likely misspelling (tfmpi/variables.py).
VARIABLES = [
    ("TFMPI_TRANSPARENT", "(set by tfmpirun)", "1: transparent mode starts in each Python rank"),
    ("TFMPI_BATCH_MODE", "global", "global: each batch split over the ranks; per-rank: whole "
     "batches per rank"),
    ("TFMPI_SYNC_BATCHNORM", "1", "1: BatchNormalization moments over the global batch (the "
     "1-process run); 0: over each rank's slice"),
    ("TFMPI_SEED", "(per launch)", "the random seed every rank shares"),
    ("TFMPI_BATCH_CHECK_INTERVAL", "100", "steps between batch-agreement checks (0: never)"),
    ("TFMPI_SHARES", "auto", "adaptive: slices follow measured speeds; equal: equal slices; "
     "auto: equal in global-batch mode with every rank on one host and no probed speeds, "
     "else adaptive"),
    ("TFMPI_REBALANCE_STEPS", "10", "steps between revisions of adaptive shares (0: never)"),
    ("TFMPI_PROBE_SPEEDS", "(unset)", "each rank's relative speed, the first shares (set by "
     "--placement aware)"),
    ("TFMPI_SHARES_LOG", "(unset)", "file rank 0 writes every rebalance to, as JSON, at exit"),
    ("TFMPI_SHARES_VERBOSE", "0", "1: rank 0 prints each change of the slice sizes"),
    ("TFMPI_INPUT_SHARDING", "1", "1: each rank decodes only its slices' samples"),
    ("TFMPI_DATA_SHARDING", "elements", "elements: the 1-process batches; files: each rank reads "
     "only its files"),
    ("TFMPI_THREADS", "auto", "auto: thread pools sized to the rank's part of its host; off"),
    ("TFMPI_BIND_CORES", "0", "1: each rank keeps only its own CPUs"),
    ("TFMPI_GRADIENT_BUCKET_BYTES", "0", "bytes per gradient allreduce in backward order (0: one)"),
    ("TFMPI_SHARDED_UPDATE", "0", "1: each rank updates only the variables it owns"),
    ("TFMPI_FUSED_UPDATES", "1", "1: Keras' Adam and SGD-momentum updates run as one kernel "
     "(bit for bit the same)"),
    ("TFMPI_VERIFY", "off", "(set by tfmpirun --verify) reference: the 1-process run records "
     "its steps; compare: the ranks compare theirs with it"),
    ("TFMPI_VERIFY_DIR", "", "(set by tfmpirun --verify) the folder of the 1-process run's "
     "records"),
    ("TFMPI_VERIFY_STEPS", "20", "(set by tfmpirun --verify-steps) the training steps compared"),
    ("TFMPI_ALL_RANKS_OUTPUT", "0", "1: ranks other than 0 print too"),
    ("TFMPI_ALLOW_UNTESTED_VERSIONS", "0", "1: start outside the tested TensorFlow/Keras versions"),
]


_DEFAULTS = {name: default for name, default, _ in VARIABLES}


class _Reader:
    """Reads the variables of VARIABLES (unset: its default there), keeping
    every invalid value it meets, so that all of them are reported at once."""

    def __init__(self):
        self.problems = []

    def text(self, name):
        return os.environ.get(name, _DEFAULTS[name]).strip()

    def bad(self, name, value, expected):
        self.problems.append(f"tfmpi: invalid value {value!r} for {name}: {expected}")

    def choice(self, name, *choices):
        value = self.text(name).lower()
        if value in choices:
            return value
        self.bad(name, value, "expected " + " or ".join([", ".join(choices[:-1]), choices[-1]]))
        return _DEFAULTS[name]

    def whole(self, name, meaning):
        """A whole number; `meaning` says what it counts (and what 0 does)."""
        value = self.text(name)
        if value.isdigit():
            return int(value)
        self.bad(name, value, f"expected a whole number of {meaning}")
        return int(_DEFAULTS[name])

    def flag(self, name):
        """1/0, true/false, yes/no, on/off."""
        value = os.environ.get(name, _DEFAULTS[name])
        v = value.strip().lower()
        if v in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return v in ("1", "true", "yes", "on")
        self.bad(name, value, "expected 1/0, true/false, yes/no, on/off")
        return _DEFAULTS[name] == "1"

    def seed(self):
        value = os.environ.get("TFMPI_SEED")
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            self.bad("TFMPI_SEED", value, "expected an integer")
            return None


def load():
    """The Options the TFMPI_* variables set; every invalid value is reported
    (one line each) before transparent mode stops."""
    read = _Reader()
    options = Options(
        batch_mode=read.choice("TFMPI_BATCH_MODE", "global", "per-rank"),
        all_ranks_output=read.flag("TFMPI_ALL_RANKS_OUTPUT"),
        sync_batchnorm=read.flag("TFMPI_SYNC_BATCHNORM"),
        seed=read.seed(),
        batch_check_interval=read.whole("TFMPI_BATCH_CHECK_INTERVAL",
                                        "steps (0 turns the check off)"),
        allow_untested_versions=read.flag("TFMPI_ALLOW_UNTESTED_VERSIONS"),
        shares=read.choice("TFMPI_SHARES", "auto", "adaptive", "equal"),
        rebalance_steps=read.whole("TFMPI_REBALANCE_STEPS", "steps (0: keep the first shares)"),
        input_sharding=read.flag("TFMPI_INPUT_SHARDING"),
        data_sharding=read.choice("TFMPI_DATA_SHARDING", "elements", "files"),
        threads=read.choice("TFMPI_THREADS", "auto", "off"),
        bind_cores=read.flag("TFMPI_BIND_CORES"),
        gradient_buckets=read.whole("TFMPI_GRADIENT_BUCKET_BYTES",
                                    "bytes (0: one allreduce for all gradients)"),
        sharded_update=read.flag("TFMPI_SHARDED_UPDATE"),
        shares_verbose=read.flag("TFMPI_SHARES_VERBOSE"),
        fused_updates=read.flag("TFMPI_FUSED_UPDATES"),
        verify=read.choice("TFMPI_VERIFY", "off", "reference", "compare"),
        verify_dir=read.text("TFMPI_VERIFY_DIR"),
        verify_steps=read.whole("TFMPI_VERIFY_STEPS", "training steps"))
    if options.verify != "off" and not options.verify_dir:
        read.problems.append("tfmpi: TFMPI_VERIFY needs TFMPI_VERIFY_DIR (tfmpirun --verify sets "
                             "both)")
    if options.verify != "off" and options.verify_steps < 1:
        read.problems.append("tfmpi: TFMPI_VERIFY_STEPS must be at least 1")
    if options.data_sharding == "files" and options.batch_mode == "per-rank":
        read.problems.append("tfmpi: TFMPI_DATA_SHARDING=files (--data-sharding files) works "
                             "with the global batch mode only, not with "
                             "TFMPI_BATCH_MODE=per-rank")
    if read.problems:
        raise SystemExit("\n".join(read.problems))
    return options


def resolve_shares(shares, batch_mode, size, local_size, probed):
    """TFMPI_SHARES=auto as the job runs it (Note [Shares by default])."""
    if shares != "auto":
        return shares
    if batch_mode != "global" or size > local_size or probed:
        return "adaptive"
    return "equal"


# Note [Shares by default]
# Adaptive shares move rows to the ranks that compute faster, which pays where
# ranks differ: on hosts of unequal speed or load (the launcher's probes,
# TFMPI_PROBE_SPEEDS, say so before the first step). They cost something
# everywhere: a rank's slice size comes from a variable, so the traced step
# sees a batch dimension of unknown size, and what TensorFlow simplifies for a
# known size runs on every step. On a recurrent model that is a quarter of the
# step, spent in TensorFlow's executor as Keras' loop runs over the timesteps
# (which ops, not broken down): a bidirectional LSTM, one process on one core,
# a slice of 16 rows cut at bounds in variables took 19.6-20.7 ms per step
# against 15.5-16.3 ms at constant bounds (bench/dynamic_batch.py); under
# tfmpirun -np 2 on one host, 23.6-26.9 ms adaptive against 18.6-24.6 equal
# (docs/performance-history.md, "Ranks that share a host: thread pools").
# Ranks on one host share its cores, memory and network:
# unless they are bound to cores that other work also uses, none is lastingly
# slower than the others, and measured noise can move shares between alike
# ranks. So by default (TFMPI_SHARES=auto) shares are adaptive where the ranks
# span more than one host or speeds were probed, and equal (slices of a size
# the trace knows) in global-batch mode where every rank is on one host. There
# the split changes only how long a step takes (Note [Global batch],
# batching.py). In per-rank batch mode the shares decide which samples each
# rank trains on (Note [Batches by shares], per_rank.py), so there auto is
# adaptive on one host too: a script behaves alike on one host and on many.
# Every rank resolves it alike: a job spans hosts on every rank or on none, and
# the batch mode and TFMPI_PROBE_SPEEDS are settings every rank shares. The
# agreement check at start-up compares the values as set (auto against
# adaptive is a difference, even where both would resolve alike).


# Options that shape the collectives a step runs or the math (how a batch is
# split, seeded, dealt, updated), with the variable that sets each. Every rank
# must have the same values: the engine compares them when it starts (Note
# [Settings every rank shares], src/tfmpi/planning/settings_agreement.h).
_SHARED = [("batch_mode", "TFMPI_BATCH_MODE"), ("sync_batchnorm", "TFMPI_SYNC_BATCHNORM"),
           ("seed", "TFMPI_SEED"), ("batch_check_interval", "TFMPI_BATCH_CHECK_INTERVAL"),
           ("shares", "TFMPI_SHARES"), ("rebalance_steps", "TFMPI_REBALANCE_STEPS"),
           ("input_sharding", "TFMPI_INPUT_SHARDING"), ("data_sharding", "TFMPI_DATA_SHARDING"),
           ("gradient_buckets", "TFMPI_GRADIENT_BUCKET_BYTES"),
           ("sharded_update", "TFMPI_SHARDED_UPDATE"), ("verify", "TFMPI_VERIFY"),
           ("verify_dir", "TFMPI_VERIFY_DIR"), ("verify_steps", "TFMPI_VERIFY_STEPS")]
# Options that concern only the rank that reads them: its output, its thread
# pools, whether it starts outside the tested versions (the versions themselves
# are compared).
PER_RANK = ("all_ranks_output", "threads", "bind_cores", "allow_untested_versions",
            "shares_verbose", "fused_updates")


# The names TensorFlow is installed under.
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                        "tensorflow-macos", "tf-nightly", "tf-nightly-cpu")


def _speeds():
    """(text, numbers): TFMPI_PROBE_SPEEDS as set, and as numbers (None where a
    part is not one); ("", None) where unset."""
    text = os.environ.get("TFMPI_PROBE_SPEEDS", "").strip()
    try:
        return text, [float(x) for x in text.split(",")] if text else None
    except ValueError:
        return text, None


def probed_speeds(size):
    """(speeds, problem): TFMPI_PROBE_SPEEDS as one relative speed per rank,
    or (None, None) where it is unset, or (None, why) where it is not that (the
    value is then ignored: shares start equal, and auto resolves as if nothing
    were probed)."""
    text, speeds = _speeds()
    if not text:
        return None, None
    if speeds is None or len(speeds) != size:
        return None, f"ignoring TFMPI_PROBE_SPEEDS={text!r}: expected {size} numbers (one per rank)"
    return speeds, None


def _probe_speeds():
    """TFMPI_PROBE_SPEEDS as numbers (1 and 1.0 agree), else as given."""
    text, speeds = _speeds()
    if not text:
        return None
    return ",".join(map(repr, speeds)) if speeds is not None else text


def _package_version(*names):
    """The version of the first of `names` installed, or None; read from the
    package's metadata, without importing it. Only the version: a GPU host's
    tensorflow and a CPU host's tensorflow-cpu of one release agree."""
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def shared_settings(options):
    """(name, value) pairs every rank must agree on, values as in effect:
    transparent mode itself, the options above, the probed speeds, which Keras
    the script gets (TF_USE_LEGACY_KERAS as TensorFlow reads it) and the
    versions of TensorFlow and Keras (the patches and random streams follow
    them). An unset one is left out ("(not set)" in the engine's report)."""
    def text(value):
        return str(int(value)) if isinstance(value, bool) else str(value)

    legacy = os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1")
    values = [("transparent mode (TFMPI_TRANSPARENT)", "on")]
    values += [(name, getattr(options, field)) for field, name in _SHARED]
    values += [("TFMPI_PROBE_SPEEDS", _probe_speeds()),
               ("TF_USE_LEGACY_KERAS (as TensorFlow reads it)", legacy)]
    values += [("tensorflow version", _package_version(*_TENSORFLOW_PACKAGES)),
               ("keras version", _package_version("keras")),
               ("tf-keras version", _package_version("tf-keras"))]
    return [(name, text(v)) for name, v in values if v is not None]
