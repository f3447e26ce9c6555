"""stack, unstack, expand, expand_as and multiplex on the inputs of Paddle 1.8's unit tests:
forward, shape rules (with unknown dims), gradients against finite differences."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import ShapeError


@pytest.mark.parametrize("count,axis", [(4, 0), (16, 0), (20, 0), (4, -1), (4, -4), (4, 1),
                                        (4, 3)])
def test_stack_matches_paddle_cases(rng, count, axis):
    xs = [rng.random((5, 6, 7)) for _ in range(count)]
    check_op("stack", {"X": xs}, {"axis": axis},
             reference=lambda X, axis: np.stack(X, axis=axis), batch_unknown=axis not in (0, -4))
    if count == 4:
        check_grad("stack", {"X": xs}, {"axis": axis}, max_elements=10)


@pytest.mark.parametrize("axis", [0, -1, -3, 1, 2])
def test_unstack_matches_paddle_cases(rng, axis):
    x = rng.random((5, 6, 7))
    num = x.shape[axis]
    got = check_op("unstack", {"X": x}, {"axis": axis, "num": num},
                   output_counts={"Y": num}, batch_unknown=axis % 3 != 0)
    for i, part in enumerate(got["Y"]):
        np.testing.assert_array_equal(part, np.take(x, i, axis=axis))
    check_grad("unstack", {"X": x}, {"axis": axis, "num": num}, output_counts={"Y": num},
               max_elements=12)


def test_stack_and_unstack_errors():
    with pytest.raises(ShapeError, match=r"input 0 is float32\[2, 3\], input 1 float32\[3, 3\]"):
        traced_types("stack", {"X": [((2, 3), "float32"), ((3, 3), "float32")]},
                     counts={"Y": 1})
    with pytest.raises(ShapeError, match=r"stack: axis 3 is out of range"):
        traced_types("stack", {"X": [((2, 3), "float32")]}, {"axis": 3}, counts={"Y": 1})
    with pytest.raises(ShapeError, match=r"X \[4, 2\] has 4 slices along axis 0, but num=3"):
        traced_types("unstack", {"X": ((4, 2), "float32")}, {"num": 3}, counts={"Y": 3})


@pytest.mark.parametrize("shape,times", [
    ([100], [2]), ([120], [2]), ([12, 14], [2, 3]), ((2, 10, 5), (1, 1, 1)),
    ((2, 4, 15), (2, 1, 4)), ((2, 4, 5, 7), (3, 2, 1, 2)),
])
def test_expand_matches_paddle_cases(rng, shape, times):
    x = rng.random(shape)
    attrs = {"expand_times": list(times)}
    check_op("expand", {"X": x}, attrs, reference=lambda X, expand_times: np.tile(X, times),
             batch_unknown=False)
    check_grad("expand", {"X": x}, attrs)


@pytest.mark.parametrize("times,attr,given", [
    ([2], [-1], "parts"), ([1, 1], [1, -1], "parts"), ([2, 3], [-1, 3], "parts"),
    ([2, 3], [-1, 3], "marked"), ([2, 3], [], "whole"),
])
def test_expand_with_times_from_tensors(rng, times, attr, given):
    """Paddle's cases: one tensor per entry (the attr holding -1 where one stands), only
    the marked entries as tensors, the whole list as one tensor."""
    x = rng.random([12, 14][:len(times)])
    inputs = {"X": x}
    if given == "whole":
        inputs["ExpandTimes"] = np.array(times, "int32")
    else:
        marked = [t for t, a in zip(times, attr) if a == -1] if given == "marked" else times
        inputs["expand_times_tensor"] = [np.array([t], "int32") for t in marked]
    check_op("expand", inputs, {"expand_times": attr}, batch_unknown=False,
             reference=lambda **a: np.tile(x, times))
    check_grad("expand", inputs, {"expand_times": attr})


def test_expand_of_ints_and_errors(rng):
    x = rng.integers(0, 10, (2, 4, 5)).astype("int32")
    check_op("expand", {"X": x}, {"expand_times": [2, 1, 4]},
             reference=lambda X, **a: np.tile(X, (2, 1, 4)))
    with pytest.raises(ShapeError, match=r"expand_times \[2\] must have one entry per dim"):
        traced_types("expand", {"X": ((2, 3), "float32")}, {"expand_times": [2]})
    with pytest.raises(ShapeError, match=r"expand_times \[0, 1\] must be positive"):
        traced_types("expand", {"X": ((2, 3), "float32")}, {"expand_times": [0, 1]})


@pytest.mark.parametrize("x_shape,target_shape", [
    ((100,), (200,)), ((10, 12), (20, 24)), ((2, 3, 20), (4, 6, 40)),
    ((1, 1, 4, 5), (2, 3, 4, 10)),
])
def test_expand_as_matches_paddle_cases(rng, x_shape, target_shape):
    x, target = rng.random(x_shape), rng.random(target_shape)
    times = [b // a for a, b in zip(x_shape, target_shape)]
    check_op("expand_as", {"X": x, "target_tensor": target},
             reference=lambda X, target_tensor: np.tile(X, times), batch_unknown=False)
    check_grad("expand_as", {"X": x, "target_tensor": target})
    with pytest.raises(ShapeError, match="must have X's rank and dims that are multiples"):
        traced_types("expand_as", {"X": ((3,), "float32"), "target_tensor": ((4,), "float32")})


# --- multiplex ---------------------------------------------------------------------------------

def test_multiplex_matches_paddle_case(rng):
    rows = 4
    ids = rng.permutation(rows).astype("int32").reshape(rows, 1)
    xs = [rng.random((rows, 25)) for _ in range(4)]
    check_op("multiplex", {"X": xs, "Ids": ids},
             reference=lambda X, Ids: np.stack([X[k][i] for i, k in enumerate(Ids[:, 0])]))
    check_grad("multiplex", {"X": xs, "Ids": ids}, max_elements=12)


def test_multiplex_with_repeated_choices_and_errors(rng):
    xs = [rng.random((5, 2, 3)) for _ in range(3)]
    ids = np.array([[2], [2], [0], [1], [2]], "int64")
    check_op("multiplex", {"X": xs, "Ids": ids},
             reference=lambda X, Ids: np.stack([X[k][i] for i, k in enumerate(Ids[:, 0])]))
    check_grad("multiplex", {"X": xs, "Ids": ids}, max_elements=10)
    with pytest.raises(IndexError, match=r"multiplex: id 3 .* \[0, 3\)"):
        check_op("multiplex", {"X": xs, "Ids": np.array([[3]] * 5)})
    with pytest.raises(ShapeError, match=r"Ids must be a column \[B, 1\], got \[5\]"):
        traced_types("multiplex", {"X": [((5, 2), "float32")] * 2, "Ids": ((5,), "int32")})
    with pytest.raises(ShapeError, match="at least 2 candidate inputs"):
        traced_types("multiplex", {"X": [((5, 2), "float32")], "Ids": ((5, 1), "int32")})
