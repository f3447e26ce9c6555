"""The ops the layout plan pass runs in CHWN (batch innermost): each against its NCHW
self, over the odd shapes of test_conv_ops (batch 1, padding, strides, dilation, groups,
ceil_mode, global pooling), and each gradient against finite differences in CHWN; and
``transfer_layout``, which converts at a chain's ends.

What is exact: pooling (max and avg: the same operations on the same values in the same
order), elementwise ops, transfer_layout. What is within float32 rounding: convolutions
(the GEMM's columns come in another order, and BLAS may block them differently) and
batch_norm (its per-channel sums add the values in another order)."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward
from ops.test_conv_ops import CONV_CASES, conv_attrs, r

from fluid_interactive.errors import ShapeError
from fluid_interactive.ops.layouts import (
    CHWN,
    NCHW,
    adapt_broadcast_axis,
    from_layout,
    permutation,
    to_layout,
)

TO_CHWN, TO_NCHW = permutation(NCHW, CHWN), permutation(CHWN, NCHW)


def chwn(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(TO_CHWN))


def nchw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(TO_NCHW))


def test_layout_tables_agree():
    assert TO_CHWN == (1, 2, 3, 0) and TO_NCHW == (3, 0, 1, 2)
    assert to_layout((64, 20, 24, 25), CHWN) == (20, 24, 25, 64)
    assert from_layout((20, 24, 25, 64), CHWN) == (64, 20, 24, 25)
    assert to_layout((-1, 3, 5, 7), CHWN) == (3, 5, 7, -1)


# --- transfer_layout ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 2, 4, 5), (1, 3, 4, 5)])
def test_transfer_layout_both_ways_and_its_gradient(rng, shape):
    x = r(rng, *shape)
    there = check_op("transfer_layout", {"X": x}, {"src_layout": NCHW, "dst_layout": CHWN},
                     reference=lambda X, **_: X.transpose(TO_CHWN), rtol=0, atol=0,
                     batch_unknown=False)["Out"][0]
    assert there.flags.c_contiguous
    back = check_op("transfer_layout", {"X": there}, {"src_layout": CHWN, "dst_layout": NCHW},
                    reference=lambda X, **_: X.transpose(TO_NCHW), rtol=0, atol=0,
                    batch_unknown=False)["Out"][0]
    np.testing.assert_array_equal(back, x)
    check_grad("transfer_layout", {"X": x}, {"src_layout": NCHW, "dst_layout": CHWN})


def test_transfer_layout_of_one_image_is_a_view():
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops import prepare_kernel
    from fluid_interactive.ops.spec import TensorType
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    op = OpDesc("transfer_layout", {"X": ["x"]}, {"Out": ["y"]},
                {"src_layout": NCHW, "dst_layout": CHWN})
    types = {"x": TensorType(x.shape, "float32"), "y": TensorType((2, 3, 4, 1), "float32")}
    out = prepare_kernel(op, types.__getitem__, np)(x)
    assert np.shares_memory(out, x)
    np.testing.assert_array_equal(out, x.transpose(TO_CHWN))
    strided = np.arange(48, dtype=np.float32).reshape(1, 2, 3, 8)[..., ::2]
    out = prepare_kernel(op, types.__getitem__, np)(strided)   # not contiguous: a copy
    assert not np.shares_memory(out, strided) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, strided.transpose(TO_CHWN))


def test_transfer_layout_errors():
    with pytest.raises(ShapeError, match="4-D"):
        run_forward("transfer_layout", {"X": np.zeros((2, 3), np.float32)},
                    {"src_layout": NCHW, "dst_layout": CHWN})
    with pytest.raises(ShapeError, match="dst_layout must be one of 'NCHW', 'CHWN', got "
                                         "'NWHC'"):
        run_forward("transfer_layout", {"X": np.zeros((2, 3, 4, 5), np.float32)},
                    {"src_layout": NCHW, "dst_layout": "NWHC"})


# --- conv2d and conv2d_transpose -------------------------------------------------------------

def _as_chwn(attrs: dict) -> dict:
    return {**attrs, "data_format": CHWN}


CONV_T_CASES = [
    ((2, 3, 4, 5), (3, 2, 3, 3), conv_attrs()),
    ((1, 2, 3, 4), (2, 3, 2, 3), conv_attrs(strides=(2, 2), paddings=(1, 0))),
    ((2, 4, 3, 3), (4, 1, 3, 3), conv_attrs(groups=2, dilations=(2, 1))),
]


@pytest.mark.parametrize("op_type,xs,fs,attrs",
                         [("conv2d", *case) for case in CONV_CASES]
                         + [("conv2d_transpose", *case) for case in CONV_T_CASES])
def test_convolutions_in_chwn_match_nchw_and_their_gradients(rng, op_type, xs, fs, attrs):
    x, f = r(rng, *xs), r(rng, *fs)
    want = run_forward(op_type, {"Input": x, "Filter": f}, attrs)["Output"][0]
    check_op(op_type, {"Input": chwn(x), "Filter": f}, _as_chwn(attrs),
             reference=lambda **_: chwn(want), rtol=1e-5, atol=1e-6, batch_unknown=False)
    check_grad(op_type, {"Input": chwn(x), "Filter": f}, _as_chwn(attrs),
               wrt=["Input", "Filter"])


def test_conv2d_in_chwn_names_the_layout_in_errors(rng):
    with pytest.raises(ShapeError, match="Input must be a 4-D CHWN image batch"):
        run_forward("conv2d", {"Input": r(rng, 3, 4, 5), "Filter": r(rng, 2, 3, 3, 3)},
                    {"data_format": CHWN})
    with pytest.raises(ShapeError, match="data_format must be one of 'NCHW', 'NHWC', 'CHWN'"):
        run_forward("conv2d", {"Input": r(rng, 1, 3, 4, 5), "Filter": r(rng, 2, 3, 3, 3)},
                    {"data_format": "NWHC"})


# --- pool2d -------------------------------------------------------------------------------------

def pool_attrs(ptype="max", ksize=(2, 2), strides=(2, 2), paddings=(0, 0), **more):
    return {"pooling_type": ptype, "ksize": list(ksize), "strides": list(strides),
            "paddings": list(paddings), **more}


POOL_CASES = [
    ((2, 3, 8, 8), pool_attrs()),                                   # LeNet's: split windows
    ((1, 2, 7, 6), pool_attrs(ksize=(3, 2), strides=(2, 1))),       # overlapping, batch 1
    ((2, 2, 7, 7), pool_attrs(ksize=(3, 3), paddings=(1, 1), ceil_mode=True)),
    ((2, 3, 6, 5), pool_attrs("avg", (3, 3), (2, 2), (1, 1))),     # exclusive counts
    ((2, 3, 6, 5), pool_attrs("avg", (3, 3), (2, 2), (1, 1), exclusive=False)),
    ((2, 3, 5, 4), pool_attrs("avg", global_pooling=True)),
    ((3, 2, 5, 4), pool_attrs("max", global_pooling=True)),
    ((2, 2, 9, 9), pool_attrs("max", (3, 3), (3, 3))),               # rows no window reaches
    ((2, 2, 9, 8), pool_attrs("max", (2, 2), (3, 3))),               # gaps between windows
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_pool2d_in_chwn_is_exactly_nchw_and_its_gradient(rng, xs, attrs):
    x = r(rng, *xs)
    want = run_forward("pool2d", {"X": x}, attrs)["Out"][0]
    check_grad("pool2d", {"X": x}, attrs)
    exact = not attrs.get("global_pooling") or attrs["pooling_type"] == "max"
    check_op("pool2d", {"X": chwn(x)}, _as_chwn(attrs), reference=lambda **_: chwn(want),
             rtol=0 if exact else 1e-6, atol=0 if exact else 1e-7, batch_unknown=False)
    check_grad("pool2d", {"X": chwn(x)}, _as_chwn(attrs))


def test_max_pool2d_gradient_in_chwn_goes_to_the_first_maximum_as_in_nchw():
    x = np.zeros((2, 2, 4, 4), np.float32)   # every window ties: the first position wins
    x[0, 1, 2, 3] = 1.0
    attrs = pool_attrs()
    g = np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2) + 1
    ins = {"X": x, "Out": run_forward("pool2d", {"X": x}, attrs)["Out"][0], "Out@GRAD": g}
    want = run_forward("pool2d_grad", ins, attrs)["X@GRAD"][0]
    got = run_forward("pool2d_grad", {k: chwn(v) for k, v in ins.items()},
                      _as_chwn(attrs))["X@GRAD"][0]
    np.testing.assert_array_equal(nchw(got), want)


# --- batch_norm and the elementwise ops ------------------------------------------------------

def test_batch_norm_in_chwn_matches_nchw_and_its_gradients(rng):
    x = r(rng, 3, 4, 5, 2)
    c = x.shape[1]
    ins = {"X": x, "Scale": r(rng, c), "Bias": r(rng, c), "Mean": r(rng, c),
           "Variance": np.abs(r(rng, c)) + 0.5}
    attrs = {"is_test": False}
    want = run_forward("batch_norm", ins, attrs)
    got = check_op("batch_norm", {**ins, "X": chwn(x)}, {**attrs, "data_layout": CHWN},
                   batch_unknown=False)
    np.testing.assert_allclose(nchw(got["Y"][0]), want["Y"][0], rtol=1e-5, atol=1e-6)
    for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
        np.testing.assert_allclose(got[slot][0], want[slot][0], rtol=1e-5, atol=1e-6)
    check_grad("batch_norm", {**ins, "X": chwn(x)}, {**attrs, "data_layout": CHWN},
               wrt=["X", "Scale", "Bias"], through=["Y"])
    with pytest.raises(ShapeError, match="CHWN takes a 4-D X"):
        run_forward("batch_norm", {**ins, "X": r(rng, 3, 4)}, {"data_layout": CHWN})


@pytest.mark.parametrize("y_shape,axis,want", [
    ((4,), 1, 0),            # a per-channel bias: channels lead in CHWN
    ((4, 1, 1), -1, 0),      # the same, NumPy-aligned with trailing ones
    ((5, 6), 2, 1),          # a per-position [H, W] term
    ((6,), -1, 2),           # per column
    ((3, 4), 0, None),       # [N, C] cannot stay a run: the op stays in NCHW
    ((3, 4, 5, 6), -1, -1),  # an image: both sides move alike
])
def test_broadcast_axis_follows_the_layout(rng, y_shape, axis, want):
    shapes = {"X": (3, 4, 5, 6), "Y": y_shape}
    got = adapt_broadcast_axis({"axis": axis}, CHWN, shapes)
    if want is None:
        assert got is None
        return
    assert got == {"axis": want}
    x, y = r(rng, 3, 4, 5, 6), r(rng, *y_shape)
    nchw_out = run_forward("elementwise_add", {"X": x, "Y": y}, {"axis": axis})["Out"][0]
    y_in = chwn(y) if len(y_shape) == 4 else y
    out = run_forward("elementwise_add", {"X": chwn(x), "Y": y_in}, got)["Out"][0]
    np.testing.assert_array_equal(nchw(out), nchw_out)
