"""Errors raised while a method is traced: the package's classes, the user's `file:line`,
the op and the shapes involved."""
import ast
import os
import re

import pytest

import fluid
import fluid_interactive

THIS_FILE = os.path.basename(__file__)


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def _compile_error(cls, error_type, marker):
    """Compile ``cls``; the error must be ``error_type`` and name this file at the line
    carrying ``# marker``, inside the traced method."""
    with pytest.raises(error_type) as info:
        cls().Compile()
    message = str(info.value)
    assert isinstance(info.value, fluid.FluidError)
    assert f"{THIS_FILE}:{_line_of(marker)}" in message, message
    assert re.search(rf"{THIS_FILE}:{_line_of(marker)}\b", message), message
    return message


def _mentions_shape(message: str, dims: list) -> bool:
    """The message shows ``dims`` as messages spell shapes ([?, 4]) or as the text form does
    (f32[?,4]): an unknown batch dimension is always '?', never -1."""
    long = "[" + ", ".join("?" if d < 0 else str(d) for d in dims) + "]"
    short = "[" + ",".join("?" if d < 0 else str(d) for d in dims) + "]"
    return long in message or short in message


class FcSharedWrongShape(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[4])
        h = fluid.layers.fc(x, 3, param_attr='shared_w')
        return fluid.layers.fc(h, 3, param_attr='shared_w')  # fc-shared


def test_fc_on_incompatible_shapes():
    message = _compile_error(FcSharedWrongShape, fluid.NameConflictError, "fc-shared")
    assert "fc" in message and "'shared_w'" in message
    assert _mentions_shape(message, [4, 3]) and _mentions_shape(message, [3, 3])


class FcUnknownDims(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[3, None])
        return fluid.layers.fc(x, 2)  # fc-unknown


class FcFlattenDims(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[3])
        return fluid.layers.fc(x, 2, num_flatten_dims=2)  # fc-flatten


def test_fc_needs_known_inner_dims_and_a_fitting_num_flatten_dims():
    message = _compile_error(FcUnknownDims, fluid.ShapeError, "fc-unknown")
    assert isinstance(fluid.ShapeError("x"), ValueError)
    assert "fc" in message and _mentions_shape(message, [3, -1])
    message = _compile_error(FcFlattenDims, fluid.ShapeError, "fc-flatten")
    assert "num_flatten_dims=2" in message and _mentions_shape(message, [-1, 3])


class ElementwiseMismatch(fluid.Program):
    @fluid.network("x", "y")
    def f(self, x, y):
        x = fluid.layers.data(name='x', shape=[4])
        y = fluid.layers.data(name='y', shape=[3])
        return fluid.layers.elementwise_add(x, y)  # elementwise


class OperatorMismatch(fluid.Program):
    @fluid.network("x", "y")
    def f(self, x, y):
        fluid.layers.data(name='x', shape=[4])
        fluid.layers.data(name='y', shape=[3])
        return x * y  # operator


def test_elementwise_with_incompatible_shapes():
    for cls, marker, op in ((ElementwiseMismatch, "elementwise", "elementwise_add"),
                            (OperatorMismatch, "operator", "elementwise_mul")):
        message = _compile_error(cls, fluid.ShapeError, marker)
        assert op in message
        assert _mentions_shape(message, [-1, 4]) and _mentions_shape(message, [-1, 3])
        assert "(in f())" in message


class LabelWrongRank(fluid.Program):
    @fluid.network("x", "y")
    def f(self, x, y):
        x = fluid.layers.data(name='x', shape=[1])
        y = fluid.layers.data(name='y', shape=[1, 1])
        return fluid.layers.square_error_cost(input=x, label=y)  # label-rank


def test_square_error_cost_with_a_label_of_the_wrong_rank():
    message = _compile_error(LabelWrongRank, fluid.ShapeError, "label-rank")
    assert "square_error_cost" in message
    assert _mentions_shape(message, [-1, 1]) and _mentions_shape(message, [-1, 1, 1])


class UnknownActivation(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        return fluid.layers.fc(x, 2, act='sigmoidd')  # activation


def test_unknown_activation():
    message = _compile_error(UnknownActivation, fluid.OpArgumentError, "activation")
    assert isinstance(fluid.OpArgumentError("x"), ValueError)
    assert "fc" in message and "'sigmoidd'" in message and "sigmoid" in message


class UsedUndeclared(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        y = fluid.layers.fc(x, 2)  # undeclared
        fluid.layers.data(name='x', shape=[2])
        return y


def test_a_mapped_argument_used_before_its_data_var_is_declared():
    message = _compile_error(UsedUndeclared, fluid.OpArgumentError, "undeclared")
    assert "'x'" in message and "fluid.layers.data(name='x'" in message


class NotAVariable(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        fluid.layers.data(name='x', shape=[2])
        return fluid.layers.mean([1.0, 2.0])  # not-a-var


class BadParamAttr(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        return fluid.layers.fc(x, 2, param_attr=3)  # param-attr


class BadSize(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        return fluid.layers.fc(x, 0)  # fc-size


class BadData(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        return fluid.layers.data(name='x', shape=[2], dtype='float31')  # data-dtype


class RedeclaredData(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        fluid.layers.data(name='x', shape=[2])
        return fluid.layers.data(name='x', shape=[3])  # data-twice


@pytest.mark.parametrize("cls, marker, words", [
    (NotAVariable, "not-a-var", ["list"]),
    (BadParamAttr, "param-attr", ["param_attr", "int"]),
    (BadSize, "fc-size", ["size", "0"]),
    (BadData, "data-dtype", ["float31"]),
    (RedeclaredData, "data-twice", ["f32[?,3]", "f32[?,2]"]),
])
def test_bad_layer_arguments(cls, marker, words):
    message = _compile_error(cls, fluid.OpArgumentError, marker)
    for word in words:
        assert word in message


def test_a_failed_compile_leaves_no_trace_behind():
    with pytest.raises(fluid.ShapeError):
        ElementwiseMismatch().Compile()
    with pytest.raises(fluid.FluidError, match="while it is traced"):
        fluid.layers.data(name='x', shape=[1])
    assert list(FcUnknownDims.__dict__)  # still a class; compiling another one works:

    class Fine(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[2])
            return fluid.layers.fc(x, 2)

    assert list(Fine().Compile().parameters()) == ["fc_0.w_0", "fc_0.b_0"]


def test_every_error_class_is_a_fluid_error_and_a_builtin():
    builtins = (ValueError, TypeError, RuntimeError, KeyError)
    for name in fluid.__all__:
        obj = getattr(fluid, name)
        if isinstance(obj, type) and issubclass(obj, Warning):
            assert issubclass(obj, fluid.FluidWarning), name
            continue
        if isinstance(obj, type) and issubclass(obj, Exception) and obj is not fluid.FluidError:
            assert issubclass(obj, fluid.FluidError), name
            if obj is not fluid.EOFException:
                assert issubclass(obj, builtins), name


def test_no_assert_statements_in_frontend_or_ir():
    root = os.path.dirname(fluid_interactive.__file__)
    found = []
    for folder in ("frontend", "ir"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path) as f:
                        tree = ast.parse(f.read(), path)
                    found += [f"{path}:{node.lineno}" for node in ast.walk(tree)
                              if isinstance(node, ast.Assert)]
    assert found == []
