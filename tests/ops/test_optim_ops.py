"""The update ops (sgd, momentum, adam) against NumPy references in float64: one step,
several steps chained through their own outputs, no writes into inputs, fresh output
arrays, planner buffers when offered, and shape rules that reject mismatched state."""
import numpy as np
import pytest
from ops.harness import build_op, check_op, run_forward

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import get_spec, infer_op, prepare_kernel
from fluid_interactive.ops.spec import TensorType

f32 = np.float32


def r(rng, *shape, dtype=f32):
    return rng.standard_normal(shape).astype(dtype)


def lr(value, dtype=f32):
    return np.array([value], dtype=dtype)


# --- references (float64) -------------------------------------------------------------------

def sgd_ref(Param, Grad, LearningRate, **_):
    return Param - LearningRate * Grad


def momentum_ref(Param, Grad, Velocity, LearningRate, mu, use_nesterov, **_):
    v = mu * Velocity.astype(np.float64) + Grad
    step = (Grad + mu * v) if use_nesterov else v
    return {"ParamOut": Param - LearningRate * step, "VelocityOut": v}


def adam_ref(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, beta1, beta2,
             epsilon, **_):
    m1 = beta1 * Moment1.astype(np.float64) + (1 - beta1) * Grad
    m2 = beta2 * Moment2.astype(np.float64) + (1 - beta2) * Grad * Grad
    lr_t = LearningRate * np.sqrt(1 - Beta2Pow) / (1 - Beta1Pow)
    return {"ParamOut": Param - lr_t * m1 / (np.sqrt(m2) + epsilon), "Moment1Out": m1,
            "Moment2Out": m2, "Beta1PowOut": Beta1Pow * beta1, "Beta2PowOut": Beta2Pow * beta2}


def adam_inputs(rng, shape, t=1, beta1=0.9, beta2=0.999, dtype=f32):
    return {"Param": r(rng, *shape, dtype=dtype), "Grad": r(rng, *shape, dtype=dtype),
            "LearningRate": lr(0.01, dtype),
            "Moment1": (0.1 * r(rng, *shape, dtype=dtype)).astype(dtype),
            "Moment2": np.abs(0.1 * r(rng, *shape, dtype=dtype)).astype(dtype),
            "Beta1Pow": np.array([beta1 ** t], dtype), "Beta2Pow": np.array([beta2 ** t], dtype)}


# --- one step -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 3, 2)])
def test_sgd(rng, shape):
    check_op("sgd", {"Param": r(rng, *shape), "Grad": r(rng, *shape),
                     "LearningRate": lr(0.1)}, reference=sgd_ref)


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("shape", [(3, 4), (7,)])
def test_momentum(rng, nesterov, shape):
    inputs = {"Param": r(rng, *shape), "Grad": r(rng, *shape), "Velocity": r(rng, *shape),
              "LearningRate": lr(0.05)}
    check_op("momentum", inputs, {"mu": 0.8, "use_nesterov": nesterov},
             reference=momentum_ref)


def test_momentum_defaults_are_paddles():
    assert dict(get_spec("momentum").attrs) == {"mu": 0.9, "use_nesterov": False}
    assert dict(get_spec("adam").attrs) == {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
                                           "lazy_mode": False}


@pytest.mark.parametrize("t", [1, 2, 10])
@pytest.mark.parametrize("shape", [(3, 4), (6,)])
def test_adam(rng, t, shape):
    check_op("adam", adam_inputs(rng, shape, t), reference=adam_ref)


def test_adam_custom_attrs(rng):
    attrs = {"beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3}
    check_op("adam", adam_inputs(rng, (4, 2), t=3, beta1=0.5, beta2=0.9), attrs,
             reference=adam_ref)


def test_adam_float64(rng):
    got = check_op("adam", adam_inputs(rng, (3,), dtype=np.float64), reference=adam_ref,
                   rtol=1e-12, atol=1e-14)
    assert all(v[0].dtype == np.float64 for v in got.values())


def test_adam_first_step_moves_each_weight_by_about_lr(rng):
    # With zero moments and powers at beta, the first step is lr * g / (|g| + eps').
    inputs = adam_inputs(rng, (50,))
    inputs["Moment1"] = np.zeros(50, f32)
    inputs["Moment2"] = np.zeros(50, f32)
    out = run_forward("adam", inputs)["ParamOut"][0]
    np.testing.assert_allclose(np.abs(out - inputs["Param"]), 0.01, rtol=1e-3)


class _DeviceLike:
    """NumPy under another name: takes the kernels' device path (no reads to the host)."""
    __name__ = "device_like"

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.mark.parametrize("t", [1, 5])
def test_adam_device_path_matches_the_host_path(rng, t):
    inputs = adam_inputs(rng, (4, 3), t)
    op, env = build_op("adam", inputs)
    types = {n: TensorType(a.shape, a.dtype.name) for n, a in env.items()}
    for slot, ts in infer_op(op, types.__getitem__).items():
        types.update(zip(op.outputs[slot], ts))
    args = [env[n] for s in get_spec("adam").inputs for n in op.inputs.get(s.name, ())]
    host = prepare_kernel(op, types.__getitem__, np)(*args)
    device = prepare_kernel(op, types.__getitem__, _DeviceLike())(*args)
    expected = adam_ref(**inputs, **get_spec("adam").attrs)
    for h, d, slot in zip(host, device, [s.name for s in get_spec("adam").outputs]):
        np.testing.assert_allclose(d, h, rtol=1e-6, atol=1e-7, err_msg=slot)
        np.testing.assert_allclose(d, expected[slot], rtol=1e-5, atol=1e-6, err_msg=slot)


# --- several steps, fed back through their own outputs --------------------------------------

def _steps(op_type, state, attrs, grads, feedback):
    """Run the op once per gradient, feeding outputs back as the next inputs."""
    for g in grads:
        out = run_forward(op_type, {**state, "Grad": g}, attrs)
        for out_slot, in_slot in feedback.items():
            state[in_slot] = out[out_slot][0]
    return state


def test_momentum_steps_match_reference(rng):
    grads = [r(rng, 4, 3) for _ in range(6)]
    p0 = r(rng, 4, 3)
    for nesterov in (False, True):
        state = {"Param": p0.copy(), "Velocity": np.zeros((4, 3), f32),
                 "LearningRate": lr(0.1)}
        got = _steps("momentum", state, {"mu": 0.9, "use_nesterov": nesterov}, grads,
                     {"ParamOut": "Param", "VelocityOut": "Velocity"})
        p, v = p0.astype(np.float64), np.zeros((4, 3))
        for g in grads:
            v = 0.9 * v + g
            p = p - 0.1 * ((g + 0.9 * v) if nesterov else v)
        np.testing.assert_allclose(got["Param"], p, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["Velocity"], v, rtol=1e-5, atol=1e-6)


def test_adam_steps_advance_the_beta_powers(rng):
    grads = [r(rng, 5) for _ in range(8)]
    p0 = r(rng, 5)
    state = {"Param": p0.copy(), "LearningRate": lr(0.01), "Moment1": np.zeros(5, f32),
             "Moment2": np.zeros(5, f32), "Beta1Pow": lr(0.9), "Beta2Pow": lr(0.999)}
    got = _steps("adam", state, {}, grads,
                 {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2",
                  "Beta1PowOut": "Beta1Pow", "Beta2PowOut": "Beta2Pow"})
    p, m1, m2 = p0.astype(np.float64), np.zeros(5), np.zeros(5)
    for t, g in enumerate(grads, start=1):
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        m1_hat, m2_hat = m1 / (1 - 0.9 ** t), m2 / (1 - 0.999 ** t)
        p = p - 0.01 * m1_hat / (np.sqrt(m2_hat) + 1e-8 / np.sqrt(1 - 0.999 ** t))
    np.testing.assert_allclose(got["Param"], p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["Beta1Pow"], [0.9 ** 9], rtol=1e-6)
    np.testing.assert_allclose(got["Beta2Pow"], [0.999 ** 9], rtol=1e-6)


# --- purity: inputs untouched, outputs fresh, buffers honoured ------------------------------

_CASES = {
    "sgd": lambda rng: {"Param": r(rng, 3, 2), "Grad": r(rng, 3, 2), "LearningRate": lr(0.1)},
    "momentum": lambda rng: {"Param": r(rng, 3, 2), "Grad": r(rng, 3, 2),
                             "Velocity": r(rng, 3, 2), "LearningRate": lr(0.1)},
    "adam": lambda rng: adam_inputs(rng, (3, 2), t=2),
}


def _kernel(op_type, inputs, with_buffers=False):
    """The op's kernel as the planner prepares it, its arguments, and the buffers offered."""
    op, env = build_op(op_type, inputs)
    spec = get_spec(op_type)
    types = {n: TensorType(a.shape, a.dtype.name) for n, a in env.items()}
    out_types = infer_op(op, types.__getitem__)
    for slot, ts in out_types.items():
        types.update(zip(op.outputs[slot], ts))
    buffers = ({slot: [np.empty(t.shape, t.dtype) for t in ts] for slot, ts in out_types.items()}
               if with_buffers else None)
    fn = prepare_kernel(op, types.__getitem__, np, buffers)
    args = [env[n] for s in spec.inputs for n in op.inputs.get(s.name, ())]
    return fn, args, buffers


def _tuple(result):
    return (result,) if isinstance(result, np.ndarray) else tuple(result)


@pytest.mark.parametrize("op_type", sorted(_CASES))
def test_update_ops_never_write_into_inputs(rng, op_type):
    inputs = _CASES[op_type](rng)
    before = {k: v.copy() for k, v in inputs.items()}
    fn, args, _ = _kernel(op_type, inputs)
    first = _tuple(fn(*args))
    for k, v in inputs.items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"{op_type} wrote into {k}")
    for o in first:
        assert not any(np.shares_memory(o, a) for a in args)
    # A second call returns new arrays: the scope still holds the previous step's results
    # until the step commits.
    second = _tuple(fn(*args))
    for x, y in zip(first, second):
        assert not np.shares_memory(x, y)
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("op_type", sorted(_CASES))
def test_update_ops_write_into_offered_buffers(rng, op_type):
    inputs = _CASES[op_type](rng)
    fn, args, buffers = _kernel(op_type, inputs, with_buffers=True)
    result = _tuple(fn(*args))
    expected = run_forward(op_type, inputs)
    for slot, value in zip([s.name for s in get_spec(op_type).outputs], result):
        assert value is buffers[slot][0]
        np.testing.assert_allclose(value, expected[slot][0], rtol=1e-6)


# --- shape rules ----------------------------------------------------------------------------

def _infer(op_type, types, attrs=None):
    spec = get_spec(op_type)
    ins = {s.name: [s.name] for s in spec.inputs if s.name in types}
    outs = {s.name: ["o_" + s.name] for s in spec.outputs}
    op = OpDesc(op_type, ins, outs, dict(attrs or {}))
    return infer_op(op, lambda n: TensorType(*types[n]))


def test_shape_rules_keep_param_types_with_a_batchless_trace():
    got = _infer("adam", {"Param": ((4, 3), "float32"), "Grad": ((4, 3), "float32"),
                          "LearningRate": ((1,), "float32"), "Moment1": ((4, 3), "float32"),
                          "Moment2": ((4, 3), "float32"), "Beta1Pow": ((1,), "float32"),
                          "Beta2Pow": ((1,), "float32")})
    assert got["ParamOut"][0] == TensorType((4, 3), "float32")
    assert got["Beta2PowOut"][0] == TensorType((1,), "float32")
    got = _infer("momentum", {"Param": ((4,), "float64"), "Grad": ((4,), "float64"),
                              "Velocity": ((4,), "float64"), "LearningRate": ((), "float32")})
    assert got["VelocityOut"][0] == TensorType((4,), "float64")


@pytest.mark.parametrize("bad,message", [
    ({"Grad": ((4, 2), "float32")}, "Grad"),
    ({"Velocity": ((3,), "float32")}, "Velocity"),
    ({"Velocity": ((4, 3), "float64")}, "Velocity"),
    ({"LearningRate": ((2,), "float32")}, "LearningRate"),
])
def test_momentum_rejects_mismatched_inputs(bad, message):
    types = {"Param": ((4, 3), "float32"), "Grad": ((4, 3), "float32"),
             "Velocity": ((4, 3), "float32"), "LearningRate": ((1,), "float32")}
    types.update(bad)
    with pytest.raises(ShapeError, match=message):
        _infer("momentum", types)


def test_adam_rejects_bad_state_and_attrs():
    types = {"Param": ((4,), "float32"), "Grad": ((4,), "float32"),
             "LearningRate": ((1,), "float32"), "Moment1": ((4,), "float32"),
             "Moment2": ((4,), "float32"), "Beta1Pow": ((1,), "float32"),
             "Beta2Pow": ((1,), "float32")}
    with pytest.raises(ShapeError, match="Moment2"):
        _infer("adam", {**types, "Moment2": ((5,), "float32")})
    with pytest.raises(ShapeError, match="Beta1Pow"):
        _infer("adam", {**types, "Beta1Pow": ((4,), "float32")})
    with pytest.raises(DTypeError, match="Beta2Pow"):
        _infer("adam", {**types, "Beta2Pow": ((1,), "int64")})
    with pytest.raises(ShapeError, match="beta1"):
        _infer("adam", types, {"beta1": 1.0})


def test_update_ops_have_no_gradient():
    for op_type in ("sgd", "momentum", "adam"):
        assert get_spec(op_type).grad is None
