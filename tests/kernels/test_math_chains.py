"""The scalar forms of Paddle 1.8's elementwise ops in the compiled tier's chains
(ops/activation.py, ops/unary_math.py, and sign, clip and scale): each compiles with
Numba and computes what the op's NumPy kernel computes, bit for bit for the piecewise and
arithmetic ones, within a unit or two in the last place for the transcendental ones (libm
against NumPy's own); and a program whose chain of them runs compiled gives the values of
the tier turned off. Ops given an attr as a tensor (scale's ScaleTensor) stay out of
chains."""
import os

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.registry import get_spec

numba = pytest.importorskip("numba")

#: op -> attrs other than the defaults (None: the defaults)
EXACT = {"softsign": None, "softshrink": {"lambda": 0.3}, "hard_shrink": None,
         "thresholded_relu": {"threshold": 0.25}, "relu6": None,
         "brelu": {"t_min": -1.0, "t_max": 2.0}, "hard_sigmoid": None, "hard_swish": None,
         "ceil": None, "floor": None, "round": None, "reciprocal": None, "rsqrt": None,
         "sign": None, "clip": {"min": -0.5, "max": 0.7}, "scale": {"scale": 3.0, "bias": -1.0}}
ROUNDED = {"logsigmoid": None, "tanh_shrink": None, "softplus": None, "stanh": None,
           "selu": None, "soft_relu": {"threshold": 3.0}, "mish": {"threshold": 2.0},
           "sin": None, "cos": None, "atan": None, "asin": None, "acos": None, "log1p": None}


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory):
    old = os.environ.get("FLUID_KERNEL_CACHE")
    os.environ["FLUID_KERNEL_CACHE"] = str(tmp_path_factory.mktemp("math_chains"))
    yield
    if old is None:
        del os.environ["FLUID_KERNEL_CACHE"]
    else:
        os.environ["FLUID_KERNEL_CACHE"] = old


def special_values(dtype):
    rng = np.random.default_rng(0)
    edges = [-0.0, 0.0, np.nan, np.inf, -np.inf, 0.5, -0.5, 1.5, 2.5, -2.5, 6.0, -3.0, 3.0,
             0.3, -0.3, 0.25, 2.0, -1.0, 0.7, -0.5, 1e-30, -1e-30, 0.49999997, 8388609.0]
    return np.concatenate([rng.standard_normal(3000) * 4, edges]).astype(dtype)


def compiled_member(op, attrs, dtype):
    from fluid_interactive.kernels.build import load
    from fluid_interactive.kernels.chain import chain_source
    spec = get_spec(op)
    consts = []

    def const(v):
        consts.append(v)
        return f"C{len(consts) - 1}"
    expr = spec.scalar(spec.full_attrs(attrs or {}), const)
    assert expr is not None, op
    return load(chain_source([(op, expr, False)], 1, [], consts, dtype))


def both(op, attrs, dtype):
    """(the compiled scalar form's result, the NumPy kernel's) on the special values."""
    x = special_values(dtype)
    out = np.empty_like(x)
    env = {"x": x}
    with np.errstate(all="ignore"):
        compiled_member(op, attrs, dtype)(x, out)
        run_ops([OpDesc(op, {"X": ["x"]}, {"Out": ["y"]}, dict(attrs or {}))], env)
    return out, env["y"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(EXACT))
def test_piecewise_and_arithmetic_members_are_bit_identical(op, dtype):
    got, want = both(op, EXACT[op], dtype)
    bits = np.int32 if dtype == "float32" else np.int64
    assert np.array_equal(got.view(bits), want.view(bits)), op


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(ROUNDED))
def test_transcendental_members_agree_to_rounding(op, dtype):
    got, want = both(op, ROUNDED[op], dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    ulp = np.finfo(dtype).eps
    np.testing.assert_allclose(got[finite], want[finite], rtol=4 * ulp,
                               atol=4 * ulp * float(np.abs(want[finite]).max()) * 1e-3)


def test_a_chain_is_exact_where_its_members_are_bit_identical():
    """The chains the tier runs by default are those whose members give NumPy's values bit
    for bit (above); the others need FLUID_KERNELS=fast (ops/chain.py, `exact`)."""
    from fluid_interactive.ops.chain import exact
    for ops, want in ((EXACT, True), (ROUNDED, False)):
        for op, attrs in ops.items():
            spec = get_spec(op)
            expr = spec.scalar(spec.full_attrs(attrs or {}), lambda v: "C0")
            assert exact(expr) is want, (op, expr)


def test_every_new_elementwise_op_has_a_scalar_form_but_erf():
    for op in {**EXACT, **ROUNDED}:
        assert get_spec(op).scalar is not None, op
    assert get_spec("erf").scalar is None   # no erf in the chain module's namespace


def chained(act_a, act_b, scale_tensor=False):
    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data("x", shape=[64, 128], dtype="float32",
                                  append_batch_size=False)
            h = getattr(fluid.layers, act_a)(x)
            s = fluid.layers.fill_constant([1], "float32", 0.5) if scale_tensor else 0.5
            h = fluid.layers.scale(h, scale=s, bias=0.25)
            h = fluid.layers.clip(fluid.layers.elementwise_mul(h, x), -2.0, 2.0)
            return getattr(fluid.layers, act_b)(h)
    return Net


@pytest.mark.parametrize("act_a,act_b", [("hard_swish", "relu6"), ("softsign", "round"),
                                         ("hard_sigmoid", "thresholded_relu")])
def test_a_chain_of_new_ops_runs_compiled_with_the_numpy_values(monkeypatch, act_a, act_b):
    x = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32) * 3
    monkeypatch.setenv("FLUID_KERNELS", "numpy")
    want = chained(act_a, act_b)().Compile().f(x)
    monkeypatch.setenv("FLUID_KERNELS", "auto")
    prog = chained(act_a, act_b)().Compile()
    prog.f(x)
    assert ".py:chain" in prog.f.source
    assert prog.f.runner.plan_tier().wait(300)
    got = prog.f(x)
    assert prog.f.runner.tier == "compiled"
    np.testing.assert_array_equal(got, want)


def test_a_scale_given_as_a_tensor_stays_out_of_the_chain(monkeypatch):
    monkeypatch.setenv("FLUID_KERNELS", "auto")
    prog = chained("relu6", "hard_swish", scale_tensor=True)().Compile()
    x = np.linspace(-3, 3, 64 * 128, dtype=np.float32).reshape(64, 128)
    got = prog.f(x)
    lines = prog.f.source.splitlines()
    scale = [line for line in lines if "= scale(X=" in line]
    fused = [line for line in lines if "fused_elementwise(" in line]
    assert len(scale) == 1 and "ScaleTensor=" in scale[0]
    assert len(fused) == 1 and "['scale'" not in fused[0] and "['hard_swish'" in fused[0]
    h = np.clip((np.clip(x, 0, 6) * 0.5 + 0.25) * x, -2, 2)
    np.testing.assert_allclose(got, h * np.clip(h + 3, 0, 6) / 6, rtol=1e-6, atol=1e-7)
