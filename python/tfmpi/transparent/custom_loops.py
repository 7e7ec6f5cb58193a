"""Custom training loops that iterate a batched tf.data dataset eagerly
(`for x, y in dataset:`): each rank gets its slice of every batch (global
batch mode) or whole batches dealt round-robin (per-rank mode, per_rank.py).

Note [Iterators read in a function]
A script may make the iterator eagerly and read it inside a tf.function
(`it = iter(dataset)`, then `next(it)` in a function that takes `it` or
closes over it, often in a `tf.range` loop of several steps). The slicing
iterator then runs while the function is traced: it reads the inner
iterator's next element as an op of the function, and slices it and records
the split as ops too, so every call of the function takes the next batch and
this rank's rows of it, as the eager loop does. The work shares are the ones
in force when the function runs (the cuts are variables); they are revised
only from eagerly read batches, whose steps are timed one by one.

A pipeline of the shape input_sharding.py rewrites is rewritten first, so
each rank decodes only its slices (Note [Sharded input]). A preprocessing
layer's adapt reads whole batches (Note [Adapt reads whole batches], adapt.py).

The split is recorded in variables (batching.py, Note [Split context]) when a
batch is handed out, and cleared when the loop ends: when the iterator is
exhausted, or dropped by a `break`.
"""

import tensorflow as tf

from tfmpi.transparent import (adapt, batch_check, batching, batchnorm, flags, gradient_tape,
                               input_sharding, loops, shares, state, weight_check)

_BATCHING = {"_BatchDataset", "_PaddedBatchDataset", "_ParallelBatchDataset",
             "_DenseToRaggedDataset", "_DenseToSparseBatchDataset", "_RebatchDataset",
             "_GroupByWindowDataset", "_MapAndBatchDataset"}
_UNBATCHING = {"_UnbatchDataset"}


def is_batched(dataset):
    """Whether the dataset's elements are batches (a batch op nearer than any unbatch)."""
    d = dataset
    while d is not None:
        name = type(d).__name__
        if name in _BATCHING:
            return True
        if name in _UNBATCHING:
            return False
        try:
            inputs = d._inputs()
        except Exception:
            return False
        d = inputs[0] if len(inputs) == 1 else None
    return False


class SlicingIterator:
    """Yields this rank's slice of each batch and records the split."""

    _latest = None  # the iterator whose split the variables hold

    def __init__(self, inner):
        self._inner = inner
        self._check = batch_check.EagerCheck()
        self._taken = False
        self._steps = 0  # batches handed out (eagerly) in this pass

    def __iter__(self):
        return self

    def __next__(self):
        if not tf.executing_eagerly():
            return self._next_in_graph()
        try:
            element = next(self._inner)
        except StopIteration:
            self._end(finished=True)
            raise
        sharded = input_sharding.unwrap(element)
        if sharded is None:
            self._check.check(element)
            local, split = batching.slice_batch(element)
        else:
            local, split, given = sharded
            self._check.check(local, given)
        if split is not None:
            state.custom_split_seen = True
            if self._taken:  # the previous step is done
                batchnorm.agree_moving_statistics()  # Note [Moving statistics that agree]
                weight_check.after_step(gradient_tape.trained_variables(), "a custom loop",
                                        self._steps)  # Note [Weight agreement]
            SlicingIterator._latest = self
            batching.record_split(split)
            shares.custom_loop_step(first=not self._taken)  # Note [Live shares]
            self._taken = True
            self._steps += 1
        return local

    def _next_in_graph(self):
        """The next batch read inside a tf.function that the script handed
        this iterator (made eagerly): the same slice and split, as ops of the
        function, which run at every call (Note [Iterators read in a
        function]). The end of the data surfaces as the function's
        OutOfRangeError, as for any iterator read in a function."""
        element = next(self._inner)
        sharded = input_sharding.unwrap(element)
        if sharded is None:
            batch_check.graph_check(element, loop=batch_check.CUSTOM_LOOP)
            local, split = batching.slice_batch(element)
        else:
            local, split, given = sharded
            batch_check.graph_check(local, given, loop=batch_check.CUSTOM_LOOP)
        if split is not None:
            state.custom_split_seen = True
            SlicingIterator._latest = self
            batching.record_split(split)
        return local

    def get_next(self):
        return self.__next__()

    def _end(self, finished=False):
        if SlicingIterator._latest is self:
            SlicingIterator._latest = None
            if finished:  # every rank here alike (not when the iterator is collected)
                batchnorm.agree_moving_statistics()
            batching.reset_weight()
            gradient_tape.forget()

    def __del__(self):
        try:
            self._end()
        except Exception:  # interpreter shutdown: nothing left to reset
            pass

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install():
    from tensorflow.python.data.ops import dataset_ops

    original_iter = dataset_ops.DatasetV2.__iter__

    def __iter__(self):
        if (state.size == 1 or loops.inside_keras_loop() or not tf.executing_eagerly()
                or flags.active(adapt.FLAG) or not is_batched(self)):
            return original_iter(self)
        if state.options.batch_mode == "global":
            plan = input_sharding.plan_for(self)
            if plan is None:
                return SlicingIterator(original_iter(self))
            return SlicingIterator(original_iter(input_sharding.rewrite(plan)))
        from tfmpi.transparent import per_rank

        return original_iter(per_rank.deal_batches(self))

    dataset_ops.DatasetV2.__iter__ = __iter__
