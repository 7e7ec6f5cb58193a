"""Ranks other than 0 are quiet by default: their stdout goes nowhere, and
TensorFlow's and Python's warnings are muted. Tracebacks still reach stderr."""

import os
import sys
import warnings


def configure(rank, options):
    if rank == 0 or options.all_ranks_output:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stdout = open(os.devnull, "w")
    warnings.simplefilter("ignore")
