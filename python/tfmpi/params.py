"""Print every TFMPI_* parameter (type, default, current value, accepted values).

    python -m tfmpi.params           # the table
    python -m tfmpi.params --check   # exit 1 with a message if a set value is invalid
"""

import argparse
import sys

from tfmpi import _core
from tfmpi.errors import TfmpiError


def specs():
    """The parameter registry as a list of dicts (name, type, default, accepted, description)."""
    return _core.param_specs()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tfmpi.params", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="validate the TFMPI_* variables set in the environment")
    args = parser.parse_args(argv)
    if args.check:
        try:
            _core.check_params()
        except TfmpiError as e:
            print(f"tfmpi: {e}", file=sys.stderr)
            return 1
        print("all TFMPI_* parameters are valid")
        return 0
    sys.stdout.write(_core.param_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
