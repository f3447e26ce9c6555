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
    from fluid_interactive.kernels.chain import Member, chain_source
    spec = get_spec(op)
    form = spec.scalar(spec.full_attrs(attrs or {}))
    assert form is not None, op
    return load(chain_source([Member(op, form.fn, form.constants)], 1, [], dtype))


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
    from fluid_interactive.kernels.chain import exact
    for ops, want in ((EXACT, True), (ROUNDED, False)):
        for op, attrs in ops.items():
            spec = get_spec(op)
            fn = spec.scalar(spec.full_attrs(attrs or {})).fn
            assert exact(fn) is want, (op, fn)


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


def scalar_forms():
    """Every registered op's scalar form for its default attrs, and the attr variants
    that pick another function (scale's, mish's)."""
    from fluid_interactive.ops.registry import registered_ops
    forms = []
    for op in registered_ops():
        spec = get_spec(op)
        if spec.scalar is not None:
            forms.append((op, spec.scalar(spec.full_attrs({}))))
    for op, attrs in (("scale", {"scale": 1.0, "bias": 2.0}),
                      ("scale", {"scale": 3.0, "bias": 2.0, "bias_after_scale": False}),
                      ("scale", {"scale": 3.0, "bias": 2.0}), ("mish", {"threshold": 0.0})):
        forms.append((op, get_spec(op).scalar(get_spec(op).full_attrs(attrs))))
    return forms


def test_every_scalar_form_is_a_plain_function_that_compiles_alone():
    """What the tier compiles is each function's own source, so a form must name nothing
    of its module but np; and it must take its element(s) and then its constants."""
    import inspect

    from fluid_interactive.kernels.chain import check_scalar
    forms = scalar_forms()
    assert len({f.fn for _, f in forms}) >= 35
    for op, form in forms:
        check_scalar(form.fn)
        params = inspect.signature(form.fn).parameters
        sides = 2 if op.startswith("elementwise_") else 1
        assert len(params) == sides + len(form.constants), (op, form)


#: a chain of exact members, some of one function with other constants, some with a side
CONSTANTS_CHAIN = [("scale", {"scale": 3.0, "bias": 2.0}), ("clip", {"min": -1.0, "max": 1.5}),
                   ("elementwise_add", {}), ("scale", {"scale": 1.0, "bias": -0.25}),
                   ("hard_sigmoid", {"slope": 0.3}), ("elementwise_mul", {}),
                   ("brelu", {"t_min": -0.5, "t_max": 0.9}),
                   ("scale", {"scale": 3.0, "bias": 0.5, "bias_after_scale": False}),
                   ("softshrink", {"lambda": 0.1}), ("elementwise_sub", {})]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_chain_numbers_its_members_constants_in_order(dtype):
    """Each function once in the module, each member's constants its own: bit for bit
    the ops' NumPy values."""
    from fluid_interactive.kernels.build import load
    from fluid_interactive.kernels.chain import Member, chain_source
    members = []
    for op, attrs in CONSTANTS_CHAIN:
        form = get_spec(op).scalar(get_spec(op).full_attrs(attrs))
        members.append(Member(op, form.fn, form.constants, op.startswith("elementwise_")))
    source = chain_source(members, 2, [(1, 16)] * 3, dtype)
    assert source.text.count("def m") == 9     # clip and brelu share one function
    assert "C14 = " in source.text and "C15" not in source.text
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 16)) * 2).astype(dtype)
    ys = [(rng.standard_normal((1, 16)) * 2).astype(dtype) for _ in range(3)]
    out = np.empty_like(x)
    load(source)(x, *ys, out)
    env, name, side = {"x": x, **{f"y{k}": y for k, y in enumerate(ys)}}, "x", 0
    for i, (op, attrs) in enumerate(CONSTANTS_CHAIN):
        inputs = {"X": [name]}
        if op.startswith("elementwise_"):
            inputs["Y"], side = [f"y{side}"], side + 1
        run_ops([OpDesc(op, inputs, {"Out": [f"h{i}"]}, attrs)], env)
        name = f"h{i}"
    assert len(np.unique(env[name])) > 30      # the values did not collapse on the way
    bits = np.int32 if dtype == "float32" else np.int64
    assert np.array_equal(out.view(bits), env[name].view(bits))


def test_a_scalar_form_that_names_its_module_is_refused():
    from fluid_interactive.kernels.chain import check_scalar, exact
    limit = 2.0

    def closure(x):
        return x if x < limit else limit
    with pytest.raises(TypeError, match="module-level"):
        check_scalar(lambda x: x)
    with pytest.raises(TypeError, match="module-level"):
        check_scalar(closure)
    with pytest.raises(TypeError, match=r"names \['special_values'\]"):
        check_scalar(named_helper)
    assert exact(get_spec("elementwise_add").scalar({}).fn)
    assert not exact(get_spec("elementwise_floordiv").scalar({}).fn)   # Python's //
    assert not exact(powered)


def named_helper(x):
    return special_values(x)


def powered(x, two):
    return x ** two
