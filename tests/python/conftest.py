"""Tier 3: the numpy API. test_*.py here run in one process and launch
`mpirun -np K python -m pytest ranks/` for several K; the files in ranks/
(check_*.py) run on every rank under mpirun.

The `flavour` fixture runs a test once per Keras line: (a prelude that binds
`keras` the way a user's script gets it, the environment that selects it)."""

import pytest

collect_ignore = ["ranks"]

FLAVOURS = {
    "keras3": ("import keras\n", {}),
    "tf_keras": ("import tensorflow as tf\nkeras = tf.keras\n", {"TF_USE_LEGACY_KERAS": "1"}),
}


def flavour_of(line):
    """(prelude that binds `keras`, environment) of one Keras line; the test is
    skipped, with the reason, where that line is not installed."""
    if line == "tf_keras":
        pytest.importorskip("tf_keras", reason="tf_keras is not installed (scripts/setup.sh installs it)")
    return FLAVOURS[line]


@pytest.fixture(params=sorted(FLAVOURS))
def flavour(request):
    """(prelude that binds `keras`, environment) for each Keras line."""
    return flavour_of(request.param)
