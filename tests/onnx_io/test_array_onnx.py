"""Tensor arrays in ONNX: create_array, array_write, array_read, array_length and
tensor_array_to_tensor as ONNX sequences, outside loops, in a While's Loop body and in a
branch's If, each checked against onnxruntime (at several trip counts, zero included) and
imported back as the array ops."""
import numpy as np
import pytest

import fluid

from .helpers import as_list, assert_same, check_exported, onnx, ort_run

L = fluid.layers


def _int(value):
    return L.fill_constant([1], "int64", value)


class Filled(fluid.Program):
    """A While that appends each step's state to an array and reads the previous one
    back, the array stacked and joined after it, and its length."""

    @fluid.network("x", "n")
    def infer(self, x, n):
        x = L.data("x", shape=[4])
        n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter([4, 4], "float32", name="w")
        h = L.scale(x, 1.0)
        steps = L.create_array("float32")
        L.array_write(h, _int(0), array=steps)
        i = _int(0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            before = L.array_read(steps, i)            # what the step before wrote
            L.assign(L.tanh(L.matmul(before, w) + x), output=h)
            L.increment(i, in_place=True)
            L.array_write(h, i, array=steps)           # i is the length: an append
            L.less_than(i, n, cond=cond)
        stacked, index = L.tensor_array_to_tensor(steps, axis=1, use_stack=True)
        joined, sizes = L.tensor_array_to_tensor(steps, axis=1, use_stack=False)
        return stacked, index, joined, sizes, L.array_length(steps), h


def _feeds(rng, width: int, counts, slot: str = "n", batches=(1, 3)) -> list[dict]:
    return [{"x": rng.standard_normal((batch, width)).astype(np.float32),
             slot: np.array([n])} for batch in batches for n in counts]


def _array_ops(back) -> set[str]:
    block = back.program.block("infer")
    return {op.type for b in back.program.blocks if b.idx == block.idx or b.parent_idx >= 1
            for op in b.ops}


@pytest.mark.parametrize("opset", [13, 17, 21])
def test_a_while_filling_an_array_matches_onnxruntime_at_several_trip_counts(opset, tmp_path,
                                                                             rng):
    prog = Filled().Compile(seed=0)
    path = str(tmp_path / "filled.onnx")
    back = check_exported(prog, path, _feeds(rng, 4, (0, 1, 2, 5)), opset=opset)
    model = onnx.load(path)
    loop = next(node for node in model.graph.node if node.op_type == "Loop")
    body = {node.op_type for node in loop.attribute[0].g.node}
    assert {"SequenceAt", "SequenceLength", "If"} <= body   # the write: an If on I < length
    assert "SequenceInsert" in str(loop) and "ConcatFromSequence" in str(model.graph)
    assert {"write_to_array", "read_from_array", "tensor_array_to_tensor"} <= _array_ops(back)
    theirs = ort_run(path, {"x": np.ones((2, 4), np.float32), "n": np.array([3])})
    assert theirs[0].shape == (2, 4, 4) and int(theirs[4][0]) == 4


class Nested(fluid.Program):
    """Arrays through nested loops: an outer While whose condition is an array's length,
    which stacks that array and reads another (never written in the loop) in its body,
    and an inner While appending to the outer array at its length."""

    @fluid.network("x", "n")
    def infer(self, x, n):
        x = L.data("x", shape=[3])
        n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
        table = L.array_write(x, _int(0))
        L.array_write(x * 2.0, _int(1), array=table)
        acc = L.array_write(x, _int(0))
        total = L.scale(x, 0.0)
        cond = L.less_than(L.array_length(acc), n)
        outer = L.While(cond)
        with outer.block():
            so_far, _ = L.tensor_array_to_tensor(acc, axis=0, use_stack=True)
            step = L.reduce_mean(so_far, dim=0) + L.array_read(table, _int(1))
            j = _int(0)
            again = L.less_than(j, _int(2))
            inner = L.While(again)
            with inner.block():
                L.array_write(L.tanh(step), L.array_length(acc), array=acc)
                L.increment(j, in_place=True)
                L.less_than(j, _int(2), cond=again)
            L.assign(total + step, output=total)
            L.less_than(L.array_length(acc), n, cond=cond)
        joined, sizes = L.tensor_array_to_tensor(acc, axis=1, use_stack=False)
        return joined, sizes, total


def test_arrays_in_nested_loops_match_onnxruntime(tmp_path, rng):
    prog = Nested().Compile(seed=0)
    path = str(tmp_path / "nested.onnx")
    check_exported(prog, path, _feeds(rng, 3, (0, 1, 2, 5, 6), batches=(2, 4)))
    for n, length in ((0, 1), (2, 3), (6, 7)):
        theirs = ort_run(path, {"x": np.ones((2, 3), np.float32), "n": np.array([n])})
        assert theirs[0].shape == (2, 3 * length)
        np.testing.assert_array_equal(theirs[1], np.full(length, 3, np.int32))


def _filled_from_empty(batch_known: bool):
    """A While that fills an array from empty: at zero trips nothing is written. Its
    rows are [2, 3], or [?, 3] without ``batch_known``."""
    class Empty(fluid.Program):
        @fluid.network("x", "n")
        def infer(self, x, n):
            x = L.data("x", shape=[2, 3] if batch_known else [3],
                       append_batch_size=not batch_known)
            n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
            rows = L.create_array("float32")
            h = L.scale(x, 1.0)
            i = _int(0)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():
                L.assign(L.sigmoid(h) - 0.25, output=h)
                L.array_write(h, i, array=rows)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            stacked, index = L.tensor_array_to_tensor(rows, axis=0, use_stack=True)
            joined, sizes = L.tensor_array_to_tensor(rows, axis=-1, use_stack=False)
            return stacked, index, joined, sizes, L.array_length(rows)
    return Empty().Compile(seed=0)


def test_an_empty_array_gives_the_empty_tensors_of_infer(tmp_path, rng):
    prog = _filled_from_empty(batch_known=True)
    path = str(tmp_path / "empty.onnx")
    check_exported(prog, path, _feeds(rng, 3, (0, 1, 4), batches=(2,)))
    for n in (0, 4):
        theirs = ort_run(path, {"x": np.ones((2, 3), np.float32), "n": np.array([n])})
        assert theirs[0].shape == (n, 2, 3) and theirs[2].shape == (2, 3 * n)


def test_an_empty_array_of_rows_of_unknown_batch_has_no_rows_in_onnx(tmp_path, rng):
    """An empty array's unknown dims are 0 in onnxruntime, which cannot know them; infer
    knows them from its plan (docs/export.md says so), and so does the imported program.
    Non-empty, the three agree."""
    prog = _filled_from_empty(batch_known=False)
    path = str(tmp_path / "rows.onnx")
    check_exported(prog, path, _feeds(rng, 3, (1, 3), batches=(2, 5)))
    x = rng.standard_normal((2, 3)).astype(np.float32)
    ours = prog.infer(x, np.array([0]))
    theirs = ort_run(path, {"x": x, "n": np.array([0])})
    assert ours[0].shape == (0, 2, 3) and theirs[0].shape == (0, 0, 3)
    assert ours[2].shape == (2, 0) and theirs[2].shape == (0, 0)
    assert theirs[1].shape == theirs[3].shape == (0,) and int(theirs[4][0]) == 0
    again = as_list(fluid.import_onnx(path).infer(x, np.array([0])))
    for k, (a, w) in enumerate(zip(again, ours)):
        assert_same(a, w, 0, 0, f"output {k}")


class Written(fluid.Program):
    """Arrays outside any loop: appends, an overwrite, reads and the length; int32
    indices; an array first made by array_write."""

    @fluid.network("x")
    def infer(self, x):
        x = L.data("x", shape=[3])
        arr = L.array_write(x, _int(0))
        L.array_write(x * 2.0, _int(1), array=arr)
        L.array_write(x * 3.0, L.fill_constant([1], "int32", 2), array=arr)
        L.array_write(x - 1.0, _int(1), array=arr)           # overwrites element 1
        middle = L.array_read(arr, L.fill_constant([1], "int32", 1))
        stacked, _ = L.tensor_array_to_tensor(arr, axis=-1, use_stack=True)
        return middle, stacked, L.array_length(arr)


def test_arrays_outside_loops_match_onnxruntime(tmp_path, rng):
    prog = Written().Compile(seed=0)
    path = str(tmp_path / "written.onnx")
    check_exported(prog, path, [{"x": rng.standard_normal((b, 3)).astype(np.float32)}
                                for b in (1, 6)])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(ort_run(path, {"x": x})[1][..., 1], x - 1.0, rtol=1e-6)


def test_a_returned_array_is_an_onnx_sequence(tmp_path, rng):
    class Returned(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = L.data("x", shape=[3])
            arr = L.array_write(x, _int(0))
            L.array_write(L.exp(x), _int(1), array=arr)
            return arr
    prog = Returned().Compile(seed=0)
    path = str(tmp_path / "returned.onnx")
    check_exported(prog, path, [{"x": rng.standard_normal((b, 3)).astype(np.float32)}
                                for b in (1, 4)])
    assert onnx.load(path).graph.output[0].type.HasField("sequence_type")


class Branch(fluid.Program):
    """A Switch case that writes an array the method made before it."""

    @fluid.network("x", "k")
    def infer(self, x, k):
        x = L.data("x", shape=[3])
        k = L.data("k", shape=[1], dtype="int64", append_batch_size=False)
        arr = L.array_write(x, _int(0))
        with L.Switch() as switch:
            with switch.case(L.greater_than(k, _int(0))):
                L.array_write(x * 5.0, _int(1), array=arr)
        stacked, _ = L.tensor_array_to_tensor(arr, axis=0, use_stack=True)
        return stacked, L.array_length(arr)


def test_an_array_written_in_a_branch_matches_onnxruntime(tmp_path, rng):
    prog = Branch().Compile(seed=0)
    path = str(tmp_path / "branch.onnx")
    back = check_exported(prog, path, _feeds(rng, 3, (0, 1), "k", batches=(2, 5)), opset=14)
    assert [int(ort_run(path, {"x": np.ones((1, 3), np.float32), "k": np.array([k])})[1][0])
            for k in (0, 1)] == [1, 2]
    assert "select_input" not in _array_ops(back)   # the If came back as a Switch case


def test_an_array_through_a_branch_before_opset_14_says_which_opset():
    with pytest.raises(fluid.OnnxError, match=r"(?s)op 'conditional_block' passes the tensor "
                                              r"array .* opset=14 or later.*"
                                              r"test_array_onnx.py:"):
        fluid.export_onnx(Branch().Compile(seed=0), None, opset=13)
