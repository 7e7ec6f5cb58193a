"""Preprocessing layers learn their state from the whole data on every rank.

Note [Adapt reads whole batches]
A preprocessing layer's `adapt` (Normalization, Discretization,
TextVectorization, StringLookup, IntegerLookup, FeatureSpace, tf_keras'
PreprocessingLayer) computes the layer's state (a mean and a variance, a
vocabulary, bin edges) from the data it is given, and the model then
computes with that state in every step. In the 1-process run the state comes
from every sample; for every rank to compute the 1-process forward pass,
every rank must compute the same state from the same samples. Adapt iterates
a tf.data dataset, which custom_loops.py would take for a custom training
loop and slice: each rank then adapted on its slices of the batches, and
the ranks trained with different means and vocabularies (Keras 3), or the
slicing iterator was read inside adapt's tf.function and failed (tf_keras).
So every `adapt` of the Keras line's public classes runs with custom-loop
slicing off (the flag "whole_batches"): each rank reads the whole data, as
the 1-process run does, and the states come out identical on every rank.
"""

import functools
import inspect

from tfmpi.transparent import flags, state

FLAG = "whole_batches"


def _whole(original):
    @functools.wraps(original)
    def adapt(*args, **kwargs):
        with flags.inside(FLAG):
            return original(*args, **kwargs)

    adapt._tfmpi_wrapped = True
    return adapt


def install(*namespaces):
    """Wraps `adapt` wherever a class in `namespaces` (modules of public
    names) or one of its bases defines it."""
    if state.size == 1:
        return
    for namespace in namespaces:
        for value in list(vars(namespace).values()):
            if not inspect.isclass(value):
                continue
            for cls in value.__mro__:
                method = cls.__dict__.get("adapt")
                if callable(method) and not getattr(method, "_tfmpi_wrapped", False):
                    cls.adapt = _whole(method)
