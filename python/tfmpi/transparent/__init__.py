"""Transparent data-parallel mode: an unmodified Keras / TensorFlow script,
started by tfmpirun, trains on every rank as the 1-process run would.

activate() runs at interpreter start-up (see tfmpi/_site/sitecustomize.py). It
starts the engine (which checks that every rank has the same settings that
shape the math: config.shared_settings), makes ranks other than 0 quiet,
agrees on a random seed, and registers hooks that patch TensorFlow and Keras
when the script imports them.
The patches hold no communication logic: every collective is a tfmpi op.
"""

import dataclasses
import os
import sys

from tfmpi.transparent import config, state


def activate():
    # Children of this process (subprocess, multiprocessing spawn) must not
    # start their own engines.
    os.environ.pop("TFMPI_TRANSPARENT", None)
    if state.active:
        return
    import tfmpi

    options = config.load()
    try:
        tfmpi._core.init(config.shared_settings(options))
    except tfmpi.TfmpiError as e:
        sys.stderr.flush()
        # a line for each problem (every invalid TFMPI_* value), in one write: other
        # ranks' lines rarely land inside
        os.write(2, "".join(f"tfmpi: {line}\n" for line in str(e).splitlines()).encode())
        raise SystemExit(2)
    state.rank, state.size = tfmpi.rank(), tfmpi.size()
    state.active = True
    speeds, problem = config.probed_speeds(state.size)
    if problem and state.rank == 0:
        print(f"tfmpi: {problem}; starting from equal shares", file=sys.stderr, flush=True)
    state.options = dataclasses.replace(options, shares=config.resolve_shares(
        options.shares, options.batch_mode, state.size, tfmpi.local_size(), speeds is not None))

    from tfmpi import variables
    from tfmpi.transparent import output, seeds, import_hooks, threads

    threads.apply(state.options, tfmpi._core, state.rank, tfmpi.local_rank(), tfmpi.local_size())
    output.configure(state.rank, state.options)
    variables.say_misspelt_once(state.rank)  # TFMPI_SHARDED_UPDATES would silently not apply
    seeds.agree_on_seed(state.options)
    import_hooks.install()
    _report_uncaught_errors(tfmpi)


def _report_uncaught_errors(tfmpi):
    """When the script dies of an exception, the other ranks hear why
    (tfmpi.set_exit_reason): "rank 1 stopped with an error: ValueError: ...",
    not a hang or a guess."""
    previous = sys.excepthook

    def excepthook(kind, value, traceback):
        if "tfmpi.transparent.batch_check" in sys.modules:  # a check in the script's own function
            from tfmpi.transparent import batch_check

            mismatch = batch_check.translate(value)
            if mismatch is not None:
                print(f"{type(mismatch).__name__}: {mismatch}", file=sys.stderr)
        try:
            tfmpi.set_exit_reason(f"{kind.__name__}: {value}")
        except Exception:  # the engine may already be gone; the traceback matters more
            pass
        previous(kind, value, traceback)

    sys.excepthook = excepthook
