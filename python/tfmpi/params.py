"""Print every TFMPI_* variable (the engine's: type, default, current value, accepted
values; transparent mode's: default and meaning), and check the environment.

    python -m tfmpi.params           # the tables
    python -m tfmpi.params --check   # exit 1 with a message if a set value is invalid
                                     # or a TFMPI_* name looks misspelt
"""

import argparse
import sys

from tfmpi import _core
from tfmpi.errors import TfmpiError
from tfmpi.transparent import config
from tfmpi.variables import misspelt, unknown_variables


def specs():
    """The parameter registry as a list of dicts (name, type, default, accepted, description)."""
    return _core.param_specs()


def transparent_table():
    width = max(len(name) for name, _, _ in config.VARIABLES) + 2
    lines = ["Transparent mode (read by each rank when it starts under tfmpirun):",
             f"{'NAME':<{width}}{'DEFAULT':<20}MEANING"]
    lines += [f"{name:<{width}}{default:<20}{meaning}"
              for name, default, meaning in config.VARIABLES]
    return "\n".join(lines) + "\n"


def check():
    """The problems with the TFMPI_* variables set here, one line each (empty: none), and
    notes on set variables tfmpi does not read."""
    problems = []
    try:
        _core.check_params()
    except TfmpiError as e:  # a line for each invalid value of the engine's
        problems += [f"tfmpi: {line}" for line in str(e).splitlines()]
    try:
        config.load()
    except SystemExit as e:  # config.load's messages are strings
        problems.append(e.code if isinstance(e.code, str)
                        else f"tfmpi: invalid transparent-mode settings (exit {e.code})")
    unknown = unknown_variables()
    problems += misspelt(unknown)
    notes = [f"tfmpi: {name} is not a tfmpi variable (ignored)"
             for name, close in unknown if close is None]
    return problems, notes


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tfmpi.params", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="validate the TFMPI_* variables set in the environment")
    args = parser.parse_args(argv)
    if args.check:
        problems, notes = check()
        for line in problems + notes:
            print(line, file=sys.stderr)
        if problems:
            return 1
        print("all TFMPI_* parameters are valid")
        return 0
    sys.stdout.write(_core.param_table())
    sys.stdout.write("\n" + transparent_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
