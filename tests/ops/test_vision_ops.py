"""Convolution and pooling over 3 spatial dims, channel-last images, Paddle's padding
algorithms and adaptive pooling: each op's forward against the NumPy references of
vision_refs.py on the inputs and attributes of Paddle 1.8's unit tests (test_conv3d_op,
test_conv3d_transpose_op, test_pool3d_op, test_pool_max_op), every gradient against
finite differences, and PyTorch where it has the op."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops.harness import check_grad, check_op, run_forward
from ops.vision_refs import (
    ref_conv,
    ref_conv_transpose,
    ref_max_pool_with_index,
    ref_pool,
    same_pads,
)

from fluid_interactive.errors import ShapeError

CL = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}     # channel-first -> channel-last
CF = {4: (0, 3, 1, 2), 5: (0, 4, 1, 2, 3)}


def last(a):
    return np.ascontiguousarray(a.transpose(CL[a.ndim]))


def conv_attrs(rank, strides=None, paddings=None, dilations=None, groups=1, **more):
    return {"strides": list(strides or [1] * rank), "paddings": list(paddings or [0] * rank),
            "dilations": list(dilations or [1] * rank), "groups": groups, **more}


def _resolved(x_cf, w, attrs):
    """The explicit paddings and dilations Paddle's padding_algorithm gives."""
    algorithm = attrs.get("padding_algorithm", "EXPLICIT")
    rank = x_cf.ndim - 2
    if algorithm == "VALID":
        return [0] * (2 * rank), attrs["dilations"]
    if algorithm == "SAME":
        return same_pads(x_cf.shape[2:], w.shape[2:], attrs["strides"]), [1] * rank
    return attrs["paddings"], attrs["dilations"]


def conv_reference(channel_last=False):
    def ref(Input, Filter, **a):
        x = Input.transpose(CF[Input.ndim]) if channel_last else Input
        pads, dils = _resolved(x, Filter, a)
        y = ref_conv(x, Filter, a["strides"], pads, dils, a["groups"])
        return y.transpose(CL[y.ndim]) if channel_last else y
    return ref


# --- conv3d: test_conv3d_op's cases ---------------------------------------------------------------

CONV3D_CASES = [
    # (input NCDHW, filter, attrs)
    ((2, 3, 4, 4, 4), (6, 3, 3, 3, 3), conv_attrs(3)),
    ((2, 3, 4, 4, 4), (6, 3, 3, 3, 3), conv_attrs(3, paddings=[1, 1, 1])),
    ((2, 3, 4, 4, 4), (6, 1, 3, 3, 3), conv_attrs(3, groups=3)),
    ((2, 3, 4, 4, 4), (120, 1, 1, 1, 1), conv_attrs(3, groups=3)),              # 1x1
    ((2, 3, 6, 6, 6), (24, 1, 2, 2, 2), conv_attrs(3, dilations=[2, 2, 2], groups=3)),
    ((2, 3, 4, 4, 4), (6, 3, 3, 3, 3), conv_attrs(3, strides=[1, 1, 2],
                                                  paddings=[1, 0, 1, 0, 0, 2])),
    ((2, 3, 4, 5, 5), (6, 3, 3, 4, 3), conv_attrs(3, strides=[1, 1, 2],
                                                  paddings=[1, 0, 1, 0, 0, 2])),
    ((2, 3, 4, 4, 4), (6, 3, 3, 3, 3), conv_attrs(3, paddings=[0, 0, 0],
                                                  padding_algorithm="SAME")),
    ((2, 3, 5, 5, 5), (6, 3, 3, 3, 3), conv_attrs(3, strides=[2, 2, 2],
                                                  dilations=[2, 1, 2],
                                                  padding_algorithm="SAME")),
    ((2, 3, 4, 4, 4), (6, 3, 3, 3, 3), conv_attrs(3, paddings=[1, 1, 1],
                                                  padding_algorithm="VALID")),
]


@pytest.mark.parametrize("xs,fs,attrs", CONV3D_CASES)
def test_conv3d_forward_and_grads(rng, xs, fs, attrs):
    x, f = rng.random(xs).astype(np.float32), rng.random(fs).astype(np.float32)
    check_op("conv3d", {"Input": x, "Filter": f}, attrs, reference=conv_reference(),
             rtol=1e-4, atol=1e-4)
    small = {"Input": x[:1, :, :4, :4, :4], "Filter": f[:4] if attrs["groups"] == 1 else f}
    check_grad("conv3d", small, attrs, wrt=["Input", "Filter"], max_elements=12)


@pytest.mark.parametrize("xs,fs,attrs", [CONV3D_CASES[1], CONV3D_CASES[2], CONV3D_CASES[6],
                                         CONV3D_CASES[7]])
def test_conv3d_channel_last(rng, xs, fs, attrs):
    x, f = rng.random(xs).astype(np.float32), rng.random(fs).astype(np.float32)
    attrs = dict(attrs, data_format="NDHWC")
    got = check_op("conv3d", {"Input": last(x), "Filter": f}, attrs,
                   reference=conv_reference(channel_last=True), rtol=1e-4, atol=1e-4)
    assert got["Output"][0].shape[-1] == fs[0]
    check_grad("conv3d", {"Input": last(x[:1]), "Filter": f}, attrs, wrt=["Input", "Filter"],
               max_elements=12)


# --- conv3d_transpose: test_conv3d_transpose_op's cases -----------------------------------------

def conv_t_reference(channel_last=False):
    def ref(Input, Filter, output_size, **a):
        x = Input.transpose(CF[Input.ndim]) if channel_last else Input
        algorithm = a.get("padding_algorithm", "EXPLICIT")
        pads, dils = a["paddings"], a["dilations"]
        if algorithm == "VALID":
            pads = [0, 0, 0]
        elif algorithm == "SAME":
            pads, dils = same_pads(x.shape[2:], Filter.shape[2:], a["strides"]), [1, 1, 1]
        y = ref_conv_transpose(x, Filter, a["strides"], pads, dils, a["groups"], output_size)
        return y.transpose(CL[y.ndim]) if channel_last else y
    return ref


CONV3D_T_CASES = [
    ((2, 3, 5, 5, 5), (3, 6, 3, 3, 3), conv_attrs(3)),
    ((2, 3, 5, 5, 5), (3, 6, 3, 3, 3), conv_attrs(3, paddings=[1, 1, 1])),
    ((2, 3, 5, 5, 5), (3, 6, 3, 3, 3), conv_attrs(3, paddings=[1, 0, 1, 0, 1, 2])),
    ((2, 3, 5, 5, 6), (3, 6, 3, 3, 4), conv_attrs(3, strides=[1, 1, 2], dilations=[1, 2, 1],
                                                  padding_algorithm="SAME")),
    ((2, 3, 5, 5, 5), (3, 6, 3, 4, 3), conv_attrs(3, strides=[2, 1, 1],
                                                  padding_algorithm="VALID")),
    ((2, 4, 5, 5, 5), (4, 3, 3, 3, 3), conv_attrs(3, paddings=[1, 1, 1], groups=2)),
    ((2, 3, 5, 5, 5), (3, 6, 3, 3, 3), conv_attrs(3, paddings=[1, 1, 1], strides=[2, 2, 2])),
    ((2, 3, 5, 5, 5), (3, 6, 3, 3, 3), conv_attrs(3, paddings=[1, 1, 1],
                                                  dilations=[2, 2, 2])),
]


@pytest.mark.parametrize("xs,fs,attrs", CONV3D_T_CASES)
def test_conv3d_transpose_forward_and_grads(rng, xs, fs, attrs):
    x, f = rng.random(xs).astype(np.float32), rng.random(fs).astype(np.float32)
    check_op("conv3d_transpose", {"Input": x, "Filter": f}, attrs,
             reference=conv_t_reference(), rtol=1e-4, atol=1e-4)
    check_grad("conv3d_transpose", {"Input": x[:1, :, :3, :3, :3], "Filter": f}, attrs,
               wrt=["Input", "Filter"], max_elements=12)


def test_conv3d_transpose_channel_last_and_output_size(rng):
    x, f = rng.random((2, 3, 4, 4, 4)).astype(np.float32), rng.random((3, 2, 3, 3, 3))
    f = f.astype(np.float32)
    attrs = conv_attrs(3, strides=[2, 2, 2], paddings=[1, 1, 1], output_size=[8, 7, 8],
                       data_format="NHWC")    # Paddle's tests say NHWC for volumes too
    got = check_op("conv3d_transpose", {"Input": last(x), "Filter": f}, attrs,
                   reference=conv_t_reference(channel_last=True), rtol=1e-4, atol=1e-4)
    assert got["Output"][0].shape == (2, 8, 7, 8, 2)
    check_grad("conv3d_transpose", {"Input": last(x[:1]), "Filter": f}, attrs,
               wrt=["Input", "Filter"], max_elements=12)


# --- 2-D ops in NHWC and with SAME / VALID -------------------------------------------------------

@pytest.mark.parametrize("op,xs,fs,attrs", [
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 3), conv_attrs(2, paddings=[1, 0, 2, 1])),
    ("conv2d", (2, 4, 7, 7), (6, 2, 3, 3), conv_attrs(2, strides=[2, 2], groups=2,
                                                      padding_algorithm="SAME")),
    ("conv2d", (1, 3, 6, 8), (2, 3, 2, 3), conv_attrs(2, dilations=[2, 1],
                                                      padding_algorithm="VALID")),
    ("conv2d_transpose", (2, 3, 4, 5), (3, 2, 3, 3), conv_attrs(2, strides=[2, 2],
                                                                paddings=[1, 0, 1, 1])),
])
@pytest.mark.parametrize("channel_last", [False, True])
def test_2d_convolutions_with_data_format_and_padding_algorithm(rng, op, xs, fs, attrs,
                                                               channel_last):
    x, f = rng.random(xs).astype(np.float32), rng.random(fs).astype(np.float32)
    ref = conv_t_reference if op.endswith("transpose") else conv_reference
    if op.endswith("transpose"):
        attrs = dict(attrs, output_size=[])
    if channel_last:
        attrs, x = dict(attrs, data_format="NHWC"), last(x)
    check_op(op, {"Input": x, "Filter": f}, attrs, reference=ref(channel_last), rtol=1e-4,
             atol=1e-4)
    check_grad(op, {"Input": x[:1], "Filter": f}, attrs, wrt=["Input", "Filter"],
               max_elements=16)


# --- pool3d: test_pool3d_op's cases --------------------------------------------------------------

def pool_attrs(ptype, ksize, strides, paddings, **more):
    return {"pooling_type": ptype, "ksize": list(ksize), "strides": list(strides),
            "paddings": list(paddings), **more}


POOL3D_CASES = [
    ((2, 3, 5, 6, 5), pool_attrs("avg", [2, 3, 1], [2, 2, 3], [0, 0, 0], global_pooling=True)),
    ((2, 3, 7, 7, 7), pool_attrs("avg", [3, 3, 3], [1, 1, 1], [0, 0, 0])),
    ((2, 3, 6, 7, 7), pool_attrs("avg", [3, 3, 4], [1, 3, 2], [1, 1, 1])),
    ((2, 3, 6, 7, 7), pool_attrs("max", [3, 3, 4], [1, 3, 2], [1, 1, 1])),
    ((2, 3, 7, 7, 7), pool_attrs("max", [3, 3, 3], [1, 1, 1], [0, 0, 0])),
    ((2, 3, 6, 7, 7), pool_attrs("avg", [3, 3, 4], [1, 3, 2], [1, 1, 1], exclusive=False)),
    ((2, 3, 7, 7, 7), pool_attrs("avg", [3, 3, 3], [1, 1, 1], [0, 0, 0], adaptive=True)),
    ((2, 3, 7, 7, 6), pool_attrs("avg", [3, 3, 4], [1, 1, 2], [1, 0, 2, 1, 2, 1])),
    ((2, 3, 7, 7, 7), pool_attrs("max", [3, 3, 3], [1, 1, 1], [1, 2, 1, 1, 1, 0])),
    ((2, 3, 6, 7, 7), pool_attrs("max", [3, 3, 4], [1, 3, 2], [1, 1, 1], ceil_mode=True)),
    ((2, 3, 6, 7, 7), pool_attrs("avg", [3, 3, 4], [1, 3, 2], [1, 1, 1], ceil_mode=True)),
    ((2, 3, 5, 5, 5), pool_attrs("max", [3, 3, 3], [2, 2, 2], [0, 0, 0],
                                 padding_algorithm="SAME")),
    ((2, 3, 5, 5, 5), pool_attrs("avg", [3, 3, 3], [1, 1, 1], [1, 1, 1],
                                 padding_algorithm="VALID")),
    ((2, 3, 7, 7, 7), pool_attrs("max", [3, 4, 2], [1, 1, 1], [0, 0, 0], adaptive=True)),
]


def pool_reference(channel_last=False):
    def ref(X, **a):
        x = X.transpose(CF[X.ndim]) if channel_last else X
        pads = a["paddings"]
        if a.get("padding_algorithm") == "SAME":
            pads = same_pads(x.shape[2:], a["ksize"], a["strides"])
        elif a.get("padding_algorithm") == "VALID":
            pads = [0] * len(a["ksize"])
        y = ref_pool(x, **dict(a, paddings=pads))
        return y.transpose(CL[y.ndim]) if channel_last else y
    return ref


@pytest.mark.parametrize("xs,attrs", POOL3D_CASES)
def test_pool3d_forward_and_grads(rng, xs, attrs):
    x = rng.random(xs).astype(np.float32)
    check_op("pool3d", {"X": x}, attrs, reference=pool_reference())
    check_grad("pool3d", {"X": x[:1, :2]}, attrs, max_elements=24,
               eps=1e-4 if attrs["pooling_type"] == "max" else 1e-6)


@pytest.mark.parametrize("xs,attrs", [POOL3D_CASES[2], POOL3D_CASES[3], POOL3D_CASES[6]])
def test_pool3d_channel_last(rng, xs, attrs):
    x = last(rng.random(xs).astype(np.float32))
    attrs = dict(attrs, data_format="NDHWC")
    check_op("pool3d", {"X": x}, attrs, reference=pool_reference(channel_last=True))
    check_grad("pool3d", {"X": x[:1]}, attrs, max_elements=24,
               eps=1e-4 if attrs["pooling_type"] == "max" else 1e-6)


@pytest.mark.parametrize("attrs", [
    pool_attrs("max", [3, 2], [2, 1], [1, 0, 0, 1]),
    pool_attrs("avg", [3, 3], [2, 2], [1, 1], exclusive=False),
    pool_attrs("avg", [3, 4], [1, 1], [0, 0], adaptive=True),
    pool_attrs("max", [4, 3], [1, 1], [0, 0], adaptive=True),
    pool_attrs("max", [3, 3], [2, 2], [0, 0], padding_algorithm="SAME"),
])
@pytest.mark.parametrize("channel_last", [False, True])
def test_pool2d_data_format_adaptive_and_same(rng, attrs, channel_last):
    x = rng.random((2, 3, 7, 6)).astype(np.float32)
    if channel_last:
        attrs, x = dict(attrs, data_format="NHWC"), last(x)
    check_op("pool2d", {"X": x}, attrs, reference=pool_reference(channel_last))
    check_grad("pool2d", {"X": x[:1]}, attrs, max_elements=24,
               eps=1e-4 if attrs["pooling_type"] == "max" else 1e-6)


# --- max_pool{2,3}d_with_index: test_pool_max_op's cases ----------------------------------------

INDEX_CASES = [
    ((2, 3, 7, 7, 7), {"ksize": [3, 3, 3], "strides": [2, 2, 2], "paddings": [1, 1, 1]}),
    ((2, 3, 7, 7, 7), {"ksize": [3, 3, 3], "strides": [2, 2, 2], "paddings": [1, 1, 1],
                       "global_pooling": True}),
    ((2, 3, 7, 7, 7), {"ksize": [3, 3, 3], "strides": [2, 2, 2], "paddings": [0, 0, 0]}),
    ((2, 3, 7, 7), {"ksize": [3, 3], "strides": [1, 1], "paddings": [1, 1]}),
    ((2, 3, 7, 7), {"ksize": [3, 3], "strides": [1, 1], "paddings": [1, 1],
                    "global_pooling": True}),
    ((2, 3, 7, 7), {"ksize": [3, 3], "strides": [2, 2], "paddings": [0, 0]}),
    ((2, 3, 7, 7), {"ksize": [3, 3], "strides": [2, 2], "paddings": [0, 0], "adaptive": True}),
    ((2, 3, 7, 7, 7), {"ksize": [3, 3, 3], "strides": [2, 2, 2], "paddings": [1, 1, 1],
                       "adaptive": True}),
]


@pytest.mark.parametrize("xs,attrs", INDEX_CASES)
def test_max_pool_with_index_forward_mask_and_grad(rng, xs, attrs):
    op = f"max_pool{len(xs) - 2}d_with_index"
    x = rng.random(xs)

    def ref(X, **a):
        out, mask = ref_max_pool_with_index(X, **a)
        return {"Out": out, "Mask": mask}
    got = check_op(op, {"X": x}, attrs, reference=ref, rtol=0, atol=0)
    assert got["Mask"][0].dtype == np.int32
    check_grad(op, {"X": x[:1, :2]}, attrs, max_elements=24, eps=1e-4, through=["Out"])


def test_adaptive_windows_overlap_and_the_gradient_adds_up():
    # 5 rows pooled to 3: windows [0, 2), [1, 4), [3, 5); the maximum at row 1 serves two
    x = np.zeros((1, 1, 5, 1))
    x[0, 0, 1, 0] = 1.0
    x[0, 0, 4, 0] = 2.0
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops.interpret import run_ops
    attrs = {"ksize": [3, 1], "adaptive": True}
    env = {"X": x}
    run_ops([OpDesc("max_pool2d_with_index", {"X": ["X"]}, {"Out": ["O"], "Mask": ["M"]},
                    attrs)], env)
    np.testing.assert_array_equal(env["O"].ravel(), [1, 1, 2])
    np.testing.assert_array_equal(env["M"].ravel(), [1, 1, 4])
    env["G"] = np.ones((1, 1, 3, 1))
    run_ops([OpDesc("max_pool2d_with_index_grad", {"X": ["X"], "Mask": ["M"],
                                                   "Out@GRAD": ["G"]}, {"X@GRAD": ["D"]},
                    attrs)], env)
    np.testing.assert_array_equal(env["D"].ravel(), [0, 2, 0, 0, 1])


# --- against PyTorch -----------------------------------------------------------------------------

def _torch_grads(fn, arrays, cot):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*ts)
    (y * torch.tensor(cot)).sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _ours_grads(op, inputs, attrs, wrt, out_slot, cot):
    from ops.harness import analytic_grads, build_op

    from fluid_interactive.ops.interpret import run_ops
    op_desc, env = build_op(op, inputs, attrs)
    run_ops([op_desc], env)
    name = op_desc.outputs[out_slot][0]
    cots = {n: np.zeros(np.shape(env[n])) for n in op_desc.output_names()}
    cots[name] = cot
    grads = analytic_grads(op_desc, env, cots, wrt)
    return env[name], [grads[s][0] for s in wrt]


@pytest.mark.parametrize("stride,pad,dil,groups", [(1, 1, 1, 1), (2, 0, 1, 2), (1, 2, 2, 1)])
def test_conv3d_and_its_transpose_match_torch(rng, stride, pad, dil, groups):
    x, w = rng.standard_normal((2, 4, 5, 6, 5)), rng.standard_normal((4, 4 // groups, 3, 2, 3))
    attrs = conv_attrs(3, [stride] * 3, [pad] * 3, [dil] * 3, groups)
    ours = run_forward("conv3d", {"Input": x, "Filter": w}, attrs)["Output"][0]
    cot = rng.standard_normal(ours.shape)
    want, tgrads = _torch_grads(lambda a, b: F.conv3d(a, b, None, stride, pad, dil, groups),
                                [x, w], cot)
    got, grads = _ours_grads("conv3d", {"Input": x, "Filter": w}, attrs, ["Input", "Filter"],
                             "Output", cot)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-10)
    wt = rng.standard_normal((4, 3, 3, 2, 3))     # [C_in, C_out / groups, *k]
    attrs_t = dict(attrs, output_size=[])
    ours_t = run_forward("conv3d_transpose", {"Input": x, "Filter": wt}, attrs_t)["Output"][0]
    cot = rng.standard_normal(ours_t.shape)
    want, tgrads = _torch_grads(lambda a, b: F.conv_transpose3d(
        a, b, None, stride, pad, 0, groups, dil), [x, wt], cot)
    got, grads = _ours_grads("conv3d_transpose", {"Input": x, "Filter": wt}, attrs_t,
                             ["Input", "Filter"], "Output", cot)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("ptype,k,s,p,ceil,exclusive", [
    ("max", 2, 2, 0, False, True), ("max", 3, 2, 1, True, True),
    ("avg", 3, 2, 1, False, True), ("avg", 3, 2, 1, False, False), ("avg", 2, 2, 0, True, True),
])
def test_pool3d_matches_torch(rng, ptype, k, s, p, ceil, exclusive):
    x = rng.standard_normal((2, 3, 7, 6, 7))
    attrs = pool_attrs(ptype, [k] * 3, [s] * 3, [p] * 3, ceil_mode=ceil, exclusive=exclusive)
    out = run_forward("pool3d", {"X": x}, attrs)["Out"][0]
    cot = rng.standard_normal(out.shape)
    if ptype == "max":
        fn = lambda a: F.max_pool3d(a, k, s, p, ceil_mode=ceil)          # noqa: E731
    else:
        fn = lambda a: F.avg_pool3d(a, k, s, p, ceil_mode=ceil,          # noqa: E731
                                    count_include_pad=not exclusive)
    want, (tgrad,) = _torch_grads(fn, [x], cot)
    got, (grad,) = _ours_grads("pool3d", {"X": x}, attrs, ["X"], "Out", cot)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(grad, tgrad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,size", [((2, 3, 7, 9), (3, 4)), ((2, 2, 5, 7, 6), (2, 3, 4))])
def test_adaptive_pools_match_torch(rng, xs, size):
    rank = len(size)
    x = rng.standard_normal(xs)
    op = f"pool{rank}d"
    avg = pool_attrs("avg", size, [1] * rank, [0] * rank, adaptive=True)
    out = run_forward(op, {"X": x}, avg)["Out"][0]
    cot = rng.standard_normal(out.shape)
    tavg = F.adaptive_avg_pool2d if rank == 2 else F.adaptive_avg_pool3d
    want, (tgrad,) = _torch_grads(lambda a: tavg(a, size), [x], cot)
    got, (grad,) = _ours_grads(op, {"X": x}, avg, ["X"], "Out", cot)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(grad, tgrad, rtol=1e-12, atol=1e-12)
    tmax = F.adaptive_max_pool2d if rank == 2 else F.adaptive_max_pool3d
    want, index = tmax(torch.tensor(x), size, return_indices=True)
    got = run_forward(f"max_pool{rank}d_with_index", {"X": x},
                      {"ksize": list(size), "adaptive": True})
    np.testing.assert_allclose(got["Out"][0], want.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(got["Mask"][0], index.numpy())


# --- errors --------------------------------------------------------------------------------------

def test_conv3d_errors_name_the_shapes(rng):
    with pytest.raises(ShapeError, match=r"Input must be a 5-D NCDHW image batch, got "
                                         r"\[2, 3, 4, 4\]"):
        run_forward("conv3d", {"Input": rng.random((2, 3, 4, 4)),
                               "Filter": rng.random((2, 3, 3, 3, 3))}, conv_attrs(3))
    with pytest.raises(ShapeError, match="padding_algorithm must be one of EXPLICIT, SAME, "
                                         "VALID, got 'FULL'"):
        run_forward("conv3d", {"Input": rng.random((2, 3, 4, 4, 4)),
                               "Filter": rng.random((2, 3, 3, 3, 3))},
                    conv_attrs(3, padding_algorithm="FULL"))
    with pytest.raises(ShapeError, match="data_format must be one of 'NCDHW', 'NDHWC'"):
        run_forward("pool3d", {"X": rng.random((2, 3, 4, 4, 4))},
                    pool_attrs("max", [2, 2, 2], [2, 2, 2], [0, 0, 0], data_format="CHWN"))


def test_max_pool_with_index_error_says_no_window_is_left(rng):
    with pytest.raises(ShapeError, match="leaves no window"):
        run_forward("max_pool2d_with_index", {"X": rng.random((1, 1, 2, 2))},
                    {"ksize": [5, 5], "strides": [1, 1], "paddings": [0, 0]})
