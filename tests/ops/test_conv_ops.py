"""conv2d, conv2d_transpose and pool2d: forward against naive NumPy loops, shape rules,
and gradients against finite differences, over odd shapes (batch 1, non-square kernels,
padding, stride 2, dilation, groups, ceil_mode)."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import ShapeError

f32 = np.float32


def r(rng, *shape):
    return rng.standard_normal(shape).astype(f32)


def _pads4(p):
    p = list(p)
    return (p[0], p[0], p[1], p[1]) if len(p) == 2 else tuple(p)


# --- naive references ---------------------------------------------------------------------

def ref_conv2d(Input, Filter, strides, paddings, dilations, groups, **_):
    pt, pb, pl, pr = _pads4(paddings)
    x = np.pad(Input.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, w = x.shape
    o, cg, kh, kw = Filter.shape
    sh, sw = strides
    dh, dw = dilations
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        fg = Filter[g * og:(g + 1) * og].astype(np.float64)
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                          j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("ncij,ocij->no", patch, fg)
    return out


def ref_conv2d_transpose(Input, Filter, strides, paddings, dilations, groups, output_size,
                         **_):
    pt, pb, pl, pr = _pads4(paddings)
    n, c, h, w = Input.shape
    ci, og, kh, kw = Filter.shape
    sh, sw = strides
    dh, dw = dilations
    fh, fw = (h - 1) * sh + dh * (kh - 1) + 1, (w - 1) * sw + dw * (kw - 1) + 1
    cg = c // groups
    full = np.zeros((n, og * groups, fh + sh, fw + sw))
    for g in range(groups):
        fg = Filter[g * cg:(g + 1) * cg].astype(np.float64)
        for i in range(h):
            for j in range(w):
                full[:, g * og:(g + 1) * og, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                     j * sw:j * sw + dw * (kw - 1) + 1:dw] += np.einsum(
                    "nc,cokl->nokl", Input[:, g * cg:(g + 1) * cg, i, j], fg)
    oh, ow = fh - pt - pb, fw - pl - pr
    if output_size:
        oh, ow = output_size
    return full[:, :, pt:pt + oh, pl:pl + ow]


def ref_pool2d(X, pooling_type, ksize, strides, paddings, global_pooling, ceil_mode,
               exclusive, **_):
    n, c, h, w = X.shape
    if global_pooling:
        ksize, strides, paddings = [h, w], [1, 1], [0, 0]
    kh, kw = ksize
    sh, sw = strides
    pt, pb, pl, pr = _pads4(paddings)

    def out_dim(size, k, s, p0, p1):
        if ceil_mode:   # Paddle's rule: a last window starting in the padding is kept
            return -(-(size + p0 + p1 - k) // s) + 1
        return (size + p0 + p1 - k) // s + 1
    oh, ow = out_dim(h, kh, sh, pt, pb), out_dim(w, kw, sw, pl, pr)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * sh - pt, j * sw - pl
            h1, w1 = min(h0 + kh, h), min(w0 + kw, w)
            h0, w0 = max(h0, 0), max(w0, 0)
            win = X[:, :, h0:h1, w0:w1].astype(np.float64)
            if pooling_type == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = (h1 - h0) * (w1 - w0) if exclusive else kh * kw
                out[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return out


@pytest.fixture(params=[False, True], ids=["batch_outer", "batch_inner"])
def layout(request, monkeypatch):
    """Run a test with each column layout of the conv kernels."""
    from fluid_interactive.ops import conv
    monkeypatch.setattr(conv, "BATCH_INNER", request.param)
    return request.param


def conv_attrs(strides=(1, 1), paddings=(0, 0), dilations=(1, 1), groups=1, **more):
    return {"strides": list(strides), "paddings": list(paddings),
            "dilations": list(dilations), "groups": groups, **more}


# --- conv2d ------------------------------------------------------------------------------------

CONV_CASES = [
    # (x shape, filter shape, attrs)
    ((2, 3, 7, 6), (4, 3, 3, 3), conv_attrs()),
    ((1, 2, 6, 7), (3, 2, 2, 3), conv_attrs(paddings=(1, 2))),              # batch 1, non-square
    ((2, 3, 9, 8), (2, 3, 3, 2), conv_attrs(strides=(2, 2), paddings=(1, 1))),
    ((2, 4, 7, 7), (6, 2, 3, 3), conv_attrs(groups=2, paddings=(1, 1))),
    ((2, 2, 9, 9), (3, 2, 3, 3), conv_attrs(dilations=(2, 2), strides=(1, 2))),
    ((1, 3, 5, 6), (2, 3, 3, 3), conv_attrs(paddings=(1, 0, 2, 1))),         # 4-value paddings
    ((3, 4, 5, 5), (4, 1, 3, 3), conv_attrs(groups=4, paddings=(1, 1))),      # depthwise
    ((2, 1, 5, 4), (2, 1, 5, 4), conv_attrs()),                              # 1x1 output
]


@pytest.mark.parametrize("xs,fs,attrs", CONV_CASES)
def test_conv2d_forward_and_grads(rng, xs, fs, attrs, layout):
    x, f = r(rng, *xs), r(rng, *fs)
    check_op("conv2d", {"Input": x, "Filter": f}, attrs, reference=ref_conv2d, rtol=1e-4,
             atol=1e-5)
    check_grad("conv2d", {"Input": x, "Filter": f}, attrs, wrt=["Input", "Filter"])


def test_conv2d_grad_of_filter_only_and_input_only(rng, layout):
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops import get_spec
    from fluid_interactive.ops.interpret import run_ops
    from fluid_interactive.ops.spec import GradContext
    x, f = r(rng, 2, 3, 6, 5), r(rng, 4, 3, 3, 2)
    attrs = conv_attrs(paddings=(1, 1), strides=(2, 1))
    full = {}
    for wanted in (("Input", "Filter"), ("Input",), ("Filter",)):
        op = OpDesc("conv2d", {"Input": ["x"], "Filter": ["f"]}, {"Output": ["y"]}, attrs)
        env = {"x": x, "f": f}
        run_ops([op], env)
        env["y@GRAD"] = np.ones_like(env["y"])
        emitted: list = []
        emit = emitted.append
        spec = get_spec("conv2d")
        spec.grad(GradContext(op, spec.full_attrs(attrs), {"Output": ["y@GRAD"]},
                              {"Input": ["x@GRAD" if "Input" in wanted else None],
                               "Filter": ["f@GRAD" if "Filter" in wanted else None]},
                              lambda t, i, o, a, emit=emit: emit(OpDesc(t, i, o, a)),
                              lambda h: h + "@tmp"))
        run_ops(emitted, env)
        for slot, name in (("Input", "x@GRAD"), ("Filter", "f@GRAD")):
            if slot in wanted:
                if slot in full:
                    np.testing.assert_allclose(env[name], full[slot], rtol=1e-6)
                full[slot] = env[name]
            else:
                assert name not in env


def test_conv2d_lenet_shapes_match_reference(rng):
    from fluid_interactive.ops.conv import _ConvGeometry
    # The cost model picks batch-outer for LeNet's first conv, batch-inner for its second.
    assert not _ConvGeometry(np, "float32", (64, 1, 28, 28), (64, 20, 24, 24), (5, 5), (1, 1),
                             (0, 0, 0, 0), (1, 1), 1).batch_inner
    assert _ConvGeometry(np, "float32", (64, 20, 12, 12), (64, 50, 8, 8), (5, 5), (1, 1),
                         (0, 0, 0, 0), (1, 1), 1).batch_inner
    x, f = r(rng, 4, 1, 28, 28), r(rng, 20, 1, 5, 5) * 0.2
    check_op("conv2d", {"Input": x, "Filter": f}, conv_attrs(), reference=ref_conv2d,
             rtol=1e-4, atol=1e-5)
    x2, f2 = r(rng, 4, 20, 12, 12), r(rng, 50, 20, 5, 5) * 0.05
    check_op("conv2d", {"Input": x2, "Filter": f2}, conv_attrs(), reference=ref_conv2d,
             rtol=1e-4, atol=1e-5)


def test_conv2d_float64_is_exact(rng):
    x, f = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((2, 3, 3, 3))
    got = check_op("conv2d", {"Input": x, "Filter": f}, conv_attrs(paddings=(1, 1)),
                   reference=ref_conv2d, rtol=1e-12, atol=1e-12)
    assert got["Output"][0].dtype == np.float64


@pytest.mark.parametrize("xs,fs,attrs,match", [
    ((2, 3, 8, 8), (4, 2, 3, 3), conv_attrs(), r"3 channels.*\[4, 2, 3, 3\].*expects 2"),
    ((2, 3, 4, 4), (4, 3, 5, 5), conv_attrs(), r"larger than the padded Input \[2, 3, 4, 4\]"),
    ((2, 4, 8, 8), (6, 2, 3, 3), conv_attrs(groups=3),
     r"groups=3 does not divide the 4 channels of Input \[2, 4, 8, 8\] \(Filter \[6, 2, 3, 3"),
    ((2, 4, 8, 8), (5, 2, 3, 3), conv_attrs(groups=2),
     r"groups=2 does not divide the 5 output channels of Filter \[5, 2, 3, 3\] \(Input \[2,"),
    ((2, 3, 8), (4, 3, 3, 3), conv_attrs(), r"4-D"),
])
def test_conv2d_errors_name_the_shapes(rng, xs, fs, attrs, match):
    with pytest.raises(ShapeError, match=match):
        run_forward("conv2d", {"Input": r(rng, *xs), "Filter": r(rng, *fs)}, attrs)


def test_conv2d_rejects_bad_attrs(rng):
    with pytest.raises(ShapeError, match="strides"):
        run_forward("conv2d", {"Input": r(rng, 1, 1, 5, 5), "Filter": r(rng, 1, 1, 3, 3)},
                    conv_attrs(strides=(0, 1)))
    with pytest.raises(ShapeError, match="paddings"):
        run_forward("conv2d", {"Input": r(rng, 1, 1, 5, 5), "Filter": r(rng, 1, 1, 3, 3)},
                    conv_attrs(paddings=(1, 2, 3)))


# --- conv2d_transpose ---------------------------------------------------------------------------

CONV_T_CASES = [
    ((2, 3, 4, 5), (3, 2, 3, 3), conv_attrs()),
    ((1, 2, 3, 4), (2, 3, 2, 3), conv_attrs(strides=(2, 2))),                # batch 1
    ((2, 4, 4, 4), (4, 1, 4, 4), conv_attrs(strides=(2, 2), paddings=(1, 1))),  # GAN upsample
    ((2, 4, 3, 3), (4, 2, 3, 2), conv_attrs(groups=2, paddings=(1, 0))),
    ((2, 2, 3, 4), (2, 2, 3, 3), conv_attrs(dilations=(2, 1), strides=(1, 2))),
    ((1, 2, 3, 3), (2, 2, 3, 3), conv_attrs(strides=(2, 2), paddings=(1, 1),
                                            output_size=[6, 6])),
]


@pytest.mark.parametrize("xs,fs,attrs", CONV_T_CASES)
def test_conv2d_transpose_forward_and_grads(rng, xs, fs, attrs, layout):
    x, f = r(rng, *xs), r(rng, *fs)
    check_op("conv2d_transpose", {"Input": x, "Filter": f}, attrs,
             reference=ref_conv2d_transpose, rtol=1e-4, atol=1e-5)
    check_grad("conv2d_transpose", {"Input": x, "Filter": f}, attrs, wrt=["Input", "Filter"])


def test_conv2d_transpose_is_the_adjoint_of_conv2d(rng, layout):
    """<conv(x), y> == <x, conv_transpose(y)> for the same filter and attrs."""
    attrs = conv_attrs(strides=(2, 2), paddings=(1, 1), dilations=(1, 2), groups=2)
    x, f = r(rng, 2, 4, 9, 10).astype(np.float64), r(rng, 6, 2, 3, 3).astype(np.float64)
    y = run_forward("conv2d", {"Input": x, "Filter": f}, attrs)["Output"][0]
    g = rng.standard_normal(y.shape)
    attrs_t = dict(attrs, output_size=[9, 10])
    back = run_forward("conv2d_transpose", {"Input": g, "Filter": f}, attrs_t)["Output"][0]
    assert back.shape == x.shape
    np.testing.assert_allclose(np.sum(y * g), np.sum(x * back), rtol=1e-10)


def test_conv2d_transpose_errors(rng):
    with pytest.raises(ShapeError, match=r"3 channels.*expects 4"):
        run_forward("conv2d_transpose", {"Input": r(rng, 1, 3, 4, 4),
                                         "Filter": r(rng, 4, 2, 3, 3)}, conv_attrs())
    with pytest.raises(ShapeError, match=r"output_size"):
        run_forward("conv2d_transpose", {"Input": r(rng, 1, 2, 4, 4),
                                         "Filter": r(rng, 2, 2, 3, 3)},
                    conv_attrs(strides=(2, 2), output_size=[12, 9]))


# --- pool2d ------------------------------------------------------------------------------------

def pool_attrs(ptype="max", ksize=(2, 2), strides=(2, 2), paddings=(0, 0), global_pooling=False,
               ceil_mode=False, exclusive=True):
    return {"pooling_type": ptype, "ksize": list(ksize), "strides": list(strides),
            "paddings": list(paddings), "global_pooling": global_pooling,
            "ceil_mode": ceil_mode, "exclusive": exclusive}


POOL_CASES = [
    ((2, 3, 6, 6), pool_attrs()),
    ((1, 2, 5, 7), pool_attrs()),                                          # uncovered edge
    ((2, 2, 7, 7), pool_attrs(ksize=(3, 3), strides=(2, 2), paddings=(1, 1))),
    ((2, 2, 6, 5), pool_attrs(ksize=(3, 2), strides=(1, 2))),                # overlapping
    ((2, 2, 5, 5), pool_attrs(ceil_mode=True)),
    ((1, 3, 7, 6), pool_attrs(ksize=(3, 3), strides=(2, 2), ceil_mode=True, paddings=(1, 0))),
    ((2, 3, 4, 5), pool_attrs(global_pooling=True)),
    ((2, 2, 8, 8), pool_attrs(ksize=(2, 2), strides=(2, 2), paddings=(1, 1, 0, 1))),
]


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_pool2d_forward_and_grads(rng, xs, attrs, ptype):
    attrs = dict(attrs, pooling_type=ptype)
    x = r(rng, *xs)
    check_op("pool2d", {"X": x}, attrs, reference=ref_pool2d)
    check_grad("pool2d", {"X": x}, attrs, eps=1e-4 if ptype == "max" else 1e-6)


def test_avg_pool_inclusive_divides_by_window_area(rng):
    x = r(rng, 2, 2, 5, 5)
    attrs = pool_attrs("avg", ksize=(3, 3), strides=(2, 2), paddings=(1, 1), exclusive=False)
    check_op("pool2d", {"X": x}, attrs, reference=ref_pool2d)
    check_grad("pool2d", {"X": x}, attrs)


def test_max_pool_gradient_goes_to_the_first_maximum():
    x = np.zeros((1, 1, 4, 4), f32)       # every window ties (e.g. after relu)
    x[0, 0, 3, 3] = 1.0
    op_out = run_forward("pool2d", {"X": x}, pool_attrs())["Out"][0]
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops.interpret import run_ops
    env = {"X": x, "Out": op_out, "G": np.ones_like(op_out)}
    run_ops([OpDesc("pool2d_grad", {"X": ["X"], "Out": ["Out"], "Out@GRAD": ["G"]},
                    {"X@GRAD": ["dX"]}, pool_attrs())], env)
    expected = np.zeros((4, 4), f32)
    expected[0, 0] = expected[0, 2] = expected[2, 0] = expected[3, 3] = 1.0
    np.testing.assert_array_equal(env["dX"][0, 0], expected)


def test_pool2d_errors(rng):
    with pytest.raises(ShapeError, match=r"larger than X \[1, 1, 3, 3\]"):
        run_forward("pool2d", {"X": r(rng, 1, 1, 3, 3)}, pool_attrs(ksize=(4, 4)))
    with pytest.raises(ShapeError, match="pooling_type"):
        run_forward("pool2d", {"X": r(rng, 1, 1, 4, 4)}, pool_attrs(ptype="min"))
    with pytest.raises(ShapeError, match="smaller than the pooling window"):
        run_forward("pool2d", {"X": r(rng, 1, 1, 4, 4)}, pool_attrs(paddings=(2, 2)))
    with pytest.raises(ShapeError, match="ksize"):
        run_forward("pool2d", {"X": r(rng, 1, 1, 4, 4)}, {"ksize": []})


def test_kernels_accept_non_contiguous_inputs(rng, layout):
    """Inputs may be views (a transpose op returns one): results match contiguous ones."""
    base = r(rng, 5, 6, 3, 2).transpose(3, 2, 1, 0)            # [2, 3, 6, 5], not contiguous
    assert not base.flags.c_contiguous
    f = r(rng, 4, 3, 3, 2)
    for attrs in (conv_attrs(), conv_attrs(paddings=(1, 1), strides=(2, 1))):
        a = run_forward("conv2d", {"Input": base, "Filter": f}, attrs)["Output"][0]
        b = run_forward("conv2d", {"Input": np.ascontiguousarray(base), "Filter": f},
                        attrs)["Output"][0]
        np.testing.assert_allclose(a, b, rtol=1e-6)
    for attrs in (pool_attrs(), pool_attrs("avg", paddings=(1, 1)),
                  pool_attrs(global_pooling=True)):
        a = run_forward("pool2d", {"X": base}, attrs)["Out"][0]
        b = run_forward("pool2d", {"X": np.ascontiguousarray(base)}, attrs)["Out"][0]
        np.testing.assert_allclose(a, b, rtol=1e-6)
