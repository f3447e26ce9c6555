"""Tensor array values (`ops/array_value.py`): immutable, yet written in O(1); and the
array ops built on them, in programs: old values unchanged after later writes, arrays
grown past their end, rewind, gradients, and a count of copied elements that catches a
return to writes that copy the array."""
import os
import sys

import numpy as np
import pytest

import fluid
from fluid_interactive.ops.array_value import TensorArray

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from bench_tensor_array import FillArray, filled_array

L = fluid.layers


def values(a):
    return [None if e is None else int(e) for e in a]


# --- the value --------------------------------------------------------------------------

def test_a_write_leaves_every_older_value_as_it_was():
    a = TensorArray().write(0, 10).write(1, 11)
    b = a.write(2, 12)              # extends a's store in place
    c = a.write(2, 99)              # a second value from a: copies a's two elements
    d = b.write(0, -1)              # overwrites in place
    assert values(a) == [10, 11]
    assert values(b) == [10, 11, 12]
    assert values(c) == [10, 11, 99]
    assert values(d) == [-1, 11, 12]
    assert values(b.write(1, 5)) == [10, 5, 12] and values(b) == [10, 11, 12]


def test_a_write_past_the_end_grows_the_array_with_empty_slots():
    a = TensorArray().write(0, 1).write(3, 4)
    assert values(a) == [1, None, None, 4]
    with pytest.raises(IndexError, match="index 4 is out of range for an array of length 4"):
        a[4]


def test_a_prefix_hides_what_longer_values_wrote_when_it_grows_again():
    long = TensorArray.of([1, 2, 3, 4])
    short = long.prefix(1)
    assert values(short) == [1]
    grown = short.write(3, 9)       # elements 1, 2 of the shared store stay hidden
    assert values(grown) == [1, None, None, 9]
    assert values(long) == [1, 2, 3, 4]


def test_adding_gradient_arrays_walks_only_the_elements_written():
    dense = TensorArray.of([1, 2, 3])
    one = TensorArray().write(5, 10)          # sparse: one element, at 5
    total = dense.add(one, lambda x, y: x + y)
    assert values(total) == [1, 2, 3, None, None, 10]
    assert values(total.add(TensorArray().write(1, 7), lambda x, y: x + y)) == \
        [1, 9, 3, None, None, 10]
    assert values(dense) == [1, 2, 3]
    assert values(TensorArray().add(TensorArray().prefix(0), lambda x, y: x + y)) == []


def test_writes_in_a_chain_copy_nothing_and_branches_copy_once():
    before = TensorArray.copied_elements
    a = TensorArray()
    for k in range(1000):
        a = a.write(k, k)
    for k in reversed(range(1000)):            # a gradient replayed newest first
        a = a.prefix(k) if k % 2 else a.write(k, None)
    assert TensorArray.copied_elements == before
    b = TensorArray.of(range(10))
    b.write(10, 10)
    b.write(10, 11)                            # b lent its store already: a copy of 10
    assert TensorArray.copied_elements == before + 10


# --- in programs ---------------------------------------------------------------------------

class ReadBack(fluid.Program):
    """A fill like the benchmark's, then a second loop summing the elements read back one
    by one: the array's gradient is summed over that loop's iterations."""

    @fluid.network("x", "steps")
    def train_step(self, x, steps):
        x = L.data(name="x", shape=[4], dtype="float32")
        steps = L.data(name="steps", shape=[1], dtype="int64", append_batch_size=False)
        arr = filled_array(x, steps)

        def read(i, acc):
            return [L.increment(i, in_place=False), acc + L.array_read(arr, i)]

        def more(i, _):
            return L.less_than(i, steps)
        _, acc = L.while_loop(more, read, [L.fill_constant([1], "int64", 0), L.scale(x, 0.0)])
        loss = L.mean(acc)
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss


def test_filling_and_reading_back_in_a_training_loop_copy_nothing():
    """Forward and backward of a fill of N elements, and of a loop reading them back, copy
    no element: with writes that copied the array (a list per write) each would copy
    N^2 / 2."""
    x = np.ones((1, 4), np.float32)
    for prog in (FillArray().Compile(seed=0), ReadBack().Compile(seed=0)):
        prog.train_step(x, np.array([3], np.int64))   # plan it
        before = TensorArray.copied_elements
        for n in (50, 400):
            loss = prog.train_step(x, np.array([n], np.int64))
        assert TensorArray.copied_elements == before
    # the read loop ran, and trained w: dloss/dw = n / 4 at each step, SGD at 0.01
    np.testing.assert_allclose(loss, 400 * (0.5 - 0.01 * (3 + 50) / 4), rtol=1e-5)


def test_a_trained_fill_gives_the_true_gradient_and_rewinds():
    """The benchmark's step (x * w written at each of N iterations, stacked, mean): the
    gradient reaches w through every write."""
    prog = FillArray().Compile(seed=0)
    prog.keep_history()
    x = np.array([[1.0, -2.0, 0.5, 4.0]], np.float32)
    loss, stacked = prog.train_step(x, np.array([4], np.int64))
    np.testing.assert_allclose(stacked, np.broadcast_to(x * 0.5, (4, 1, 4)))
    # loss = mean over 4 iterations x 4 values of x * w: dloss/dw = x / 4; SGD at 0.01
    one_step = 0.5 - 0.01 * x[0] / 4
    np.testing.assert_allclose(prog.get_var("w"), one_step, rtol=1e-6)
    prog.train_step(x, np.array([7], np.int64))
    prog.rewind(1)
    np.testing.assert_allclose(prog.get_var("w"), one_step, rtol=1e-6)
    again, _ = prog.train_step(x, np.array([3], np.int64))   # from the rewound w
    np.testing.assert_allclose(loss, np.mean(x * 0.5), rtol=1e-6)
    np.testing.assert_allclose(again, np.mean(x * one_step), rtol=1e-6)
    np.testing.assert_allclose(prog.get_var("w"), one_step - 0.01 * x[0] / 4, rtol=1e-6)
