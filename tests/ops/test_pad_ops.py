"""pad2d and pad_constant_like on the inputs of Paddle 1.8's unit tests: forward against
np.pad, gradients against finite differences in every mode and layout."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import ShapeError


def _np_pad2d(X, paddings, mode, pad_value, data_format, **_):
    top, bottom, left, right = paddings
    hw = [(top, bottom), (left, right)]
    widths = [(0, 0), (0, 0)] + hw if data_format == "NCHW" else [(0, 0)] + hw + [(0, 0)]
    if mode == "constant":
        return np.pad(X, widths, mode="constant", constant_values=pad_value)
    return np.pad(X, widths, mode=mode)


@pytest.mark.parametrize("shape,paddings,mode,layout,value", [   # Paddle's cases
    ((2, 3, 4, 5), [0, 1, 2, 3], "constant", "NCHW", 0.0),
    ((2, 3, 4, 5), [0, 1, 2, 3], "reflect", "NCHW", 0.0),
    ((2, 3, 4, 5), [0, 1, 2, 3], "edge", "NCHW", 0.0),
    ((2, 4, 4, 4), [0, 1, 2, 3], "reflect", "NHWC", 0.0),
    ((2, 4, 4, 4), [0, 1, 2, 3], "edge", "NHWC", 0.0),
    ((2, 4, 4, 4), [0, 1, 2, 3], "constant", "NHWC", 1.2),
    ((1, 2, 5, 6), [3, 4, 2, 5], "edge", "NCHW", 0.0),
    ((1, 2, 5, 6), [4, 3, 5, 2], "reflect", "NCHW", 0.0),
])
def test_pad2d_matches_paddle_cases(rng, shape, paddings, mode, layout, value):
    x = rng.random(shape)
    attrs = {"paddings": paddings, "mode": mode, "data_format": layout, "pad_value": value}
    check_op("pad2d", {"X": x}, attrs, reference=_np_pad2d)
    check_grad("pad2d", {"X": x}, attrs)


def test_pad2d_with_paddings_from_a_tensor(rng):
    x = rng.random((2, 3, 4, 5))
    attrs = {"paddings": [], "mode": "reflect"}
    inputs = {"X": x, "Paddings": np.array([1, 2, 3, 1], "int32")}
    check_op("pad2d", inputs, attrs, reference=lambda X, **a: np.pad(
        X, [(0, 0), (0, 0), (1, 2), (3, 1)], mode="reflect"), batch_unknown=False)
    check_grad("pad2d", inputs, attrs)
    assert traced_types("pad2d", {"X": ((-1, 3, 4, 5), "float32"),
                                  "Paddings": ((4,), "int32")}, attrs)[0][0] == (-1, 3, -1, -1)


def test_pad2d_errors():
    with pytest.raises(ShapeError, match="mode must be one of constant, reflect, edge, got "
                                         "'circular'"):
        traced_types("pad2d", {"X": ((1, 1, 3, 3), "float32")}, {"mode": "circular"})
    with pytest.raises(ShapeError, match=r"'reflect' padding \[3, 0, 0, 0\] must be smaller"):
        traced_types("pad2d", {"X": ((1, 1, 3, 3), "float32")},
                     {"mode": "reflect", "paddings": [3, 0, 0, 0]})
    with pytest.raises(ShapeError, match="paddings has 2 entries but must have 4"):
        traced_types("pad2d", {"X": ((1, 1, 3, 3), "float32")}, {"paddings": [1, 1]})


@pytest.mark.parametrize("x_shape,y_shape,value", [
    ((16, 40), (3, 40), 0.1), ((4, 3, 4, 5), (2, 3, 4, 5), 0.5),
    ((4, 3, 4, 10), (2, 3, 2, 10), 0.5), ((3, 5), (3, 5), -1.0),
])
def test_pad_constant_like_matches_paddle_cases(rng, x_shape, y_shape, value):
    x, y = rng.random(x_shape), rng.random(y_shape)
    check_op("pad_constant_like", {"X": x, "Y": y}, {"pad_value": value},
             reference=lambda X, Y, pad_value: np.pad(
                 Y, [(0, a - b) for a, b in zip(X.shape, Y.shape)],
                 constant_values=pad_value))
    check_grad("pad_constant_like", {"X": x, "Y": y}, {"pad_value": value}, wrt=["Y"])
    with pytest.raises(ShapeError, match=r"Y \[5, 2\] must have X's rank and no dim larger"):
        traced_types("pad_constant_like", {"X": ((4, 4), "float32"), "Y": ((5, 2), "float32")})
