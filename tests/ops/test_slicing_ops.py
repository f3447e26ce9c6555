"""strided_slice, crop_tensor and crop on the inputs of Paddle 1.8's unit tests: forward
(lists as attrs and as tensors), shape rules, gradients."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import ShapeError


def _strided_reference(Input, axes, starts, ends, strides, **_):
    index = [slice(None)] * Input.ndim
    for a, s, e, st in zip(axes, starts, ends, strides):
        index[a] = slice(s, e, st)
    return Input[tuple(index)]


STRIDED_CASES = [   # Paddle's: shape, axes, starts, ends, strides
    ((100,), [0], [-4], [-3], [1]), ((100,), [0], [3], [8], [1]),
    ((100,), [0], [5], [0], [-1]), ((100,), [0], [-1], [-3], [-1]),
    ((3, 4, 10), [0, 1, 2], [0, -1, 0], [2, -3, 5], [1, -1, 1]),
    ((5, 5, 5), [0, 1, 2], [1, 0, 0], [2, 1, 3], [1, 1, 1]),
    ((5, 5, 5), [0, 1, 2], [1, -1, 0], [2, -3, 3], [1, -1, 1]),
    ((1, 100, 1), [1], [-1], [-2], [-1]), ((10, 10), [0, 1], [1, 0], [2, 2], [1, 1]),
    ((3, 3, 3, 4), [0, 1, 2, 3], [1, 0, 0, 0], [2, 2, 3, 4], [1, 1, 1, 2]),
    ((3, 3, 3, 4, 5), [0, 1, 2, 3, 4], [1, 0, 0, 0, 0], [2, 2, 3, 4, 4], [1, 1, 1, 1, 1]),
    ((7, 9), [0, 1], [-100, 8], [100, -100], [3, -2]),   # clamped like Python's slicing
]


@pytest.mark.parametrize("shape,axes,starts,ends,strides", STRIDED_CASES)
def test_strided_slice_matches_paddle_cases(rng, shape, axes, starts, ends, strides):
    x = rng.random(shape)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "strides": strides,
             "infer_flags": [1] * len(axes)}
    check_op("strided_slice", {"Input": x}, attrs, reference=_strided_reference,
             batch_unknown=False)
    check_grad("strided_slice", {"Input": x}, attrs, wrt=["Input"])


def test_strided_slice_with_lists_from_tensors(rng):
    """Paddle's tensor cases: whole lists as tensors, and single entries as tensors (the
    attr marking them in infer_flags)."""
    x = rng.random((3, 4, 5, 6))
    attrs = {"axes": [0, 1, 2], "starts": [1, 0, 2], "ends": [3, 3, 4],
             "strides": [1, 1, 1], "infer_flags": [1, 1, 1]}
    want = _strided_reference(x, **attrs)
    whole = {"StartsTensor": np.array([1, 0, 2], "int32"),
             "EndsTensor": np.array([3, 3, 4], "int64")}
    check_op("strided_slice", {"Input": x, **whole}, {**attrs, "starts": [], "ends": []},
             reference=lambda **a: want, batch_unknown=False)
    marked = {**attrs, "ends": [3, -1, 4], "infer_flags": [1, -1, 1]}
    inputs = {"Input": x, "EndsTensorList": [np.array([3], "int32")]}
    check_op("strided_slice", inputs, marked, reference=lambda **a: want, batch_unknown=False)
    check_grad("strided_slice", inputs, marked, wrt=["Input"])
    shapes = traced_types("strided_slice", {"Input": ((3, 4, 5, 6), "float32"),
                                            "EndsTensorList": [((1,), "int32")]}, marked)
    assert shapes == [((2, -1, 2, 6), "float32")]


def test_strided_slice_errors():
    with pytest.raises(ShapeError, match="the stride for axis 0 is 0"):
        traced_types("strided_slice", {"Input": ((4,), "float32")},
                     {"axes": [0], "starts": [0], "ends": [2], "strides": [0]})
    with pytest.raises(ShapeError, match="ends has 2 entries but must have 1"):
        traced_types("strided_slice", {"Input": ((4,), "float32")},
                     {"axes": [0], "starts": [0], "ends": [2, 3], "strides": [1]})
    with pytest.raises(ShapeError, match=r"must be a 1-D int32/int64 tensor of known length"):
        traced_types("strided_slice", {"Input": ((4,), "float32"),
                                       "StartsTensor": ((-1,), "int32")},
                     {"axes": [0], "ends": [2], "strides": [1]})


# --- crop_tensor, crop -----------------------------------------------------------------------

def _box(X, offsets, shape):
    return X[tuple(slice(o, o + (d - o if s == -1 else s))
                   for o, s, d in zip(offsets, shape, X.shape))]


@pytest.mark.parametrize("x_shape,shape,offsets,shape_by,offsets_by", [
    ((10, 10), [2, 2], [1, 2], "attr", "attr"), ((100,), [64], [13], "attr", "attr"),
    ((12, 24), [-1, 8], [0, 0], "attr", "attr"),
    ((4, 8, 16), [2, 2, 3], [1, 5, 3], "whole", "attr"),
    ((8, 3, 6, 6), [-1, 3, -1, 4], [0, 0, 1, 0], "whole", "attr"),
    ((2, 4, 5, 8, 8), [1, 1, 2, 4, 4], [1, 0, 0, 2, 2], "attr", "whole"),
    ((2, 2, 4, 4, 4, 2), [1, 1, 4, 2, 2, 2], [0, 0, 0, 0, 0, 0], "whole", "whole"),
    ((16, 8, 32), [-1, -1, 3], [1, 5, 3], "parts", "attr"),
    ((10, 9, 14), [3, 3, 5], [3, 5, 4], "attr", "parts"),
])
def test_crop_tensor_matches_paddle_cases(rng, x_shape, shape, offsets, shape_by,
                                          offsets_by):
    x = rng.random(x_shape)
    inputs, attrs = {"X": x}, {}
    for name, values, by, whole, parts in (("shape", shape, shape_by, "Shape", "ShapeTensor"),
                                           ("offsets", offsets, offsets_by, "Offsets",
                                            "OffsetsTensor")):
        attrs[name] = values if by != "whole" else []
        if by == "whole":
            inputs[whole] = np.array(values, "int32")
        elif by == "parts":
            inputs[parts] = [np.array([v], "int32") for v in values]
    want = _box(x, offsets, shape)
    check_op("crop_tensor", inputs, attrs, reference=lambda **a: want, batch_unknown=False)
    check_grad("crop_tensor", inputs, attrs)


@pytest.mark.parametrize("x_shape,shape,offsets,shape_by_y,offsets_by_input", [
    ((10, 10), [2, 2], [1, 2], False, False), ((16, 8, 32), [2, 2, 3], [1, 5, 3], False, False),
    ((15, 8), [15, 8], [0, 0], False, False), ((4, 8, 16), [2, 2, 3], [1, 5, 3], True, False),
    ((10, 10), [10, 10], [0, 0], True, False), ((3, 4, 10), [2, 2, 3], [1, 0, 2], False, True),
    ((10, 9, 14), [3, 3, 5], [3, 5, 4], True, True),
])
def test_crop_matches_paddle_cases(rng, x_shape, shape, offsets, shape_by_y,
                                   offsets_by_input):
    x = rng.random(x_shape)
    inputs, attrs = {"X": x}, {}
    if shape_by_y:
        inputs["Y"] = rng.random(shape)
    else:
        attrs["shape"] = shape
    if offsets_by_input:
        inputs["Offsets"] = np.array(offsets, "int32")
    else:
        attrs["offsets"] = offsets
    want = _box(x, offsets, shape)
    check_op("crop", inputs, attrs, reference=lambda **a: want, batch_unknown=False)
    check_grad("crop", inputs, attrs)


def test_crop_errors(rng):
    with pytest.raises(ShapeError, match=r"a box of shape \[3, 2\] at offsets \[2, 0\] does "
                                         r"not fit in X \[4, 4\] \(dim 0: 2 \+ 3 > 4\)"):
        traced_types("crop_tensor", {"X": ((4, 4), "float32")},
                     {"shape": [3, 2], "offsets": [2, 0]})
    with pytest.raises(ShapeError, match=r"entry 1 is 0; give a positive size or -1"):
        traced_types("crop_tensor", {"X": ((4, 4), "float32")}, {"shape": [3, 0]})
    with pytest.raises(ValueError, match=r"does not fit in X \[4, 4\]"):
        check_op("crop_tensor", {"X": rng.random((4, 4)), "Offsets": np.array([3, 0])},
                 {"shape": [2, 2]})
    with pytest.raises(ShapeError, match=r"crop: Y \[2\] \(whose shape is the box's\) must "
                                         r"have X's rank 2"):
        traced_types("crop", {"X": ((4, 4), "float32"), "Y": ((2,), "float32")})


# --- slice with bounds from tensors ---------------------------------------------------------

@pytest.mark.parametrize("given", ["starts_list", "starts_whole", "both_whole"])
def test_slice_with_bounds_from_tensors(rng, given):
    """Paddle's slice tensor cases: starts as one tensor per entry (the attr marking them
    in infer_flags), starts as one tensor, starts and ends as tensors."""
    x = rng.random((3, 4, 5, 6))
    axes, starts, ends = [0, 1, 2], [1, 0, 2], [3, 3, 4]
    want = x[1:3, 0:3, 2:4]
    attrs = {"axes": axes, "starts": starts, "ends": ends, "infer_flags": [1, 1, 1]}
    inputs = {"X": x}
    if given == "starts_list":
        inputs["StartsTensorList"] = [np.array([v], "int32") for v in starts]
        attrs.update(starts=[1, -1, 2], infer_flags=[1, -1, 1])
    else:
        inputs["StartsTensor"] = np.array(starts, "int32")
        attrs.update(starts=[], infer_flags=[-1, -1, -1])
    if given == "both_whole":
        inputs["EndsTensor"] = np.array(ends, "int64")
        attrs["ends"] = []
    check_op("slice", inputs, attrs, reference=lambda **a: want, batch_unknown=False)
    check_grad("slice", inputs, attrs)
    typed = {slot: ([(v.shape, v.dtype.name) for v in value] if isinstance(value, list)
                    else (value.shape, value.dtype.name)) for slot, value in inputs.items()}
    known = {"starts_list": (2, -1, 2, 6), "starts_whole": (-1, -1, -1, 6),
             "both_whole": (-1, -1, -1, 6)}[given]
    assert traced_types("slice", typed, attrs)[0][0] == known
