"""batch_norm and layer_norm: forward against NumPy, both modes of batch_norm, and
gradients against finite differences."""
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_op, run_forward

from fluid_interactive.errors import ShapeError
from fluid_interactive.ops.interpret import run_ops

f32 = np.float32


def r(rng, *shape):
    return rng.standard_normal(shape).astype(f32)


def check_grad_through(op_type: str, inputs: Mapping[str, np.ndarray], attrs: dict,
                       wrt: Sequence[str], through: Sequence[str], eps: float = 1e-6,
                       rtol: float = 1e-5, atol: float = 1e-7, max_elements: int = 40,
                       seed: int = 0, is_test: bool = False,
                       output_counts: dict | None = None) -> None:
    """Like the harness's check_grad, but the objective is sum(out * cotangent) over the
    output slots in ``through`` only: ops whose other outputs (running statistics, saved
    means) carry no gradient by design. Float64 throughout."""
    rng = np.random.default_rng(seed)
    promoted = {k: (np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v)
                for k, v in inputs.items()}
    op, env = build_op(op_type, promoted, attrs, output_counts)
    run_ops([op], env, is_test=is_test)
    cot = {}
    for slot, names in op.outputs.items():
        for n in names:
            a = np.asarray(env[n])
            cot[n] = (rng.standard_normal(a.shape) if slot in through and a.dtype.kind == "f"
                      else np.zeros(a.shape))
    grads = analytic_grads(op, env, cot, wrt) if not is_test else _test_mode_grads(
        op, env, cot, wrt)

    def objective(e):
        run_ops([op], e, is_test=is_test)
        return float(sum(np.sum(np.asarray(e[n], np.float64) * cot[n]) for n in cot))

    for slot in wrt:
        for name, g in zip(op.inputs[slot], grads[slot]):
            assert g is not None, f"{op_type}: no gradient for {slot}"
            x = env[name]
            assert np.shape(g) == np.shape(x)
            flat = np.arange(x.size)
            if x.size > max_elements:
                flat = rng.choice(x.size, max_elements, replace=False)
            numeric = []
            for i in flat:
                vals = []
                for sign in (1, -1):
                    e = dict(env)
                    xv = x.copy()
                    xv.flat[i] += sign * eps
                    e[name] = xv
                    vals.append(objective(e))
                numeric.append((vals[0] - vals[1]) / (2 * eps))
            np.testing.assert_allclose(np.asarray(g).reshape(-1)[flat], numeric, rtol=rtol,
                                       atol=atol, err_msg=f"{op_type} gradient of {slot}")


def _test_mode_grads(op, env, cot, wrt):
    """analytic_grads, with the emitted gradient ops run in test mode."""
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops import get_spec
    from fluid_interactive.ops.spec import GradContext
    env = dict(env)
    out_grads = {}
    for slot, names in op.outputs.items():
        out_grads[slot] = []
        for n in names:
            env[n + "@GRAD"] = cot[n]
            out_grads[slot].append(n + "@GRAD")
    in_grads = {s: [(n + "@GRAD" if s in wrt else None) for n in ns]
                for s, ns in op.inputs.items()}
    emitted = []
    spec = get_spec(op.type)
    spec.grad(GradContext(op, spec.full_attrs(op.attrs), out_grads, in_grads,
                          lambda t, i, o, a: emitted.append(OpDesc(t, i, o, a)),
                          lambda h: h + "@tmp"))
    run_ops(emitted, env, is_test=True)
    return {s: [env.get(n) if n else None for n in ns] for s, ns in in_grads.items()}


# --- batch_norm ------------------------------------------------------------------------------

def _bn_axes(x, layout):
    ch = 1 if layout == "NCHW" or x.ndim == 2 else x.ndim - 1
    axes = tuple(i for i in range(x.ndim) if i != ch)
    shape = [1] * x.ndim
    shape[ch] = x.shape[ch]
    return axes, shape


def ref_bn_train(X, Scale, Bias, Mean, Variance, momentum, epsilon, data_layout, **_):
    axes, shape = _bn_axes(X, data_layout)
    x = X.astype(np.float64)
    mu, var = x.mean(axis=axes), x.var(axis=axes)
    inv = 1.0 / np.sqrt(var + epsilon)
    y = (x - mu.reshape(shape)) * (inv * Scale).reshape(shape) + Bias.reshape(shape)
    return {"Y": y, "MeanOut": momentum * Mean + (1 - momentum) * mu,
            "VarianceOut": momentum * Variance + (1 - momentum) * var,
            "SavedMean": mu, "SavedVariance": inv}


def ref_bn_test(X, Scale, Bias, Mean, Variance, epsilon, data_layout, **_):
    axes, shape = _bn_axes(X, data_layout)
    inv = 1.0 / np.sqrt(Variance.astype(np.float64) + epsilon)
    y = (X - Mean.reshape(shape)) * (inv * Scale).reshape(shape) + Bias.reshape(shape)
    return {"Y": y, "MeanOut": Mean, "VarianceOut": Variance, "SavedMean": Mean,
            "SavedVariance": inv}


def bn_inputs(rng, x_shape, c):
    return {"X": r(rng, *x_shape) * 2 + 0.5, "Scale": r(rng, c), "Bias": r(rng, c),
            "Mean": r(rng, c) * 0.1, "Variance": np.abs(r(rng, c)) + 0.5}


BN_CASES = [((4, 3, 5, 6), 3, "NCHW"), ((1, 2, 3, 3), 2, "NCHW"), ((6, 5), 5, "NCHW"),
            ((3, 4, 4, 2), 2, "NHWC"), ((2, 3, 7), 3, "NCHW")]


@pytest.mark.parametrize("shape,c,layout", BN_CASES)
def test_batch_norm_training(rng, shape, c, layout):
    inputs = bn_inputs(rng, shape, c)
    attrs = {"momentum": 0.8, "epsilon": 1e-4, "data_layout": layout}
    check_op("batch_norm", inputs, attrs, reference=ref_bn_train, rtol=1e-4, atol=1e-5)
    check_grad_through("batch_norm", inputs, attrs, wrt=["X", "Scale", "Bias"],
                       through=["Y"], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape,c,layout", BN_CASES[:2] + BN_CASES[3:4])
def test_batch_norm_test_mode_uses_moving_statistics(rng, shape, c, layout):
    inputs = bn_inputs(rng, shape, c)
    # The attr forces inference...
    check_op("batch_norm", inputs, {"is_test": True, "data_layout": layout},
             reference=ref_bn_test, rtol=1e-5, atol=1e-5)
    # ... and so does the block's mode when the attr is left unset.
    op, env = build_op("batch_norm", inputs, {"data_layout": layout})
    run_ops([op], env, is_test=True)
    expected = ref_bn_test(**inputs, epsilon=1e-5, data_layout=layout)
    np.testing.assert_allclose(env[op.outputs["Y"][0]], expected["Y"], rtol=1e-5, atol=1e-5)
    # An explicit is_test=False trains even in an inference block.
    op, env = build_op("batch_norm", inputs, {"data_layout": layout, "is_test": False})
    run_ops([op], env, is_test=True)
    expected = ref_bn_train(**inputs, momentum=0.9, epsilon=1e-5, data_layout=layout)
    np.testing.assert_allclose(env[op.outputs["Y"][0]], expected["Y"], rtol=1e-4, atol=1e-5)
    # The gradient in test mode treats the statistics as constants.
    check_grad_through("batch_norm", inputs, {"data_layout": layout},
                       wrt=["X", "Scale", "Bias"], through=["Y"], is_test=True)


def test_batch_norm_use_global_stats_in_training(rng):
    inputs = bn_inputs(rng, (3, 2, 4, 4), 2)
    check_op("batch_norm", inputs, {"use_global_stats": True}, reference=ref_bn_test,
             rtol=1e-5, atol=1e-5)


def test_batch_norm_does_not_modify_its_inputs(rng):
    inputs = bn_inputs(rng, (3, 2, 4, 4), 2)
    before = {k: v.copy() for k, v in inputs.items()}
    run_forward("batch_norm", inputs)
    for k in inputs:
        np.testing.assert_array_equal(inputs[k], before[k])


def test_batch_norm_errors_name_the_shapes(rng):
    inputs = bn_inputs(rng, (2, 3, 4, 4), 3)
    inputs["Scale"] = r(rng, 4)
    with pytest.raises(ShapeError, match=r"Scale \[4\] must be \[C\] = \[3\].*\[2, 3, 4, 4\]"):
        run_forward("batch_norm", inputs)
    with pytest.raises(ShapeError, match="data_layout"):
        run_forward("batch_norm", bn_inputs(rng, (2, 3), 3), {"data_layout": "NCWH"})


# --- layer_norm --------------------------------------------------------------------------------

def ref_layer_norm(X, begin_norm_axis, epsilon, Scale=None, Bias=None, **_):
    m = int(np.prod(X.shape[:begin_norm_axis]))
    x = X.reshape(m, -1).astype(np.float64)
    mu, var = x.mean(axis=1), x.var(axis=1)
    y = (x - mu[:, None]) / np.sqrt(var[:, None] + epsilon)
    if Scale is not None:
        y = y * Scale
    if Bias is not None:
        y = y + Bias
    return {"Y": y.reshape(X.shape), "Mean": mu, "Variance": var}


@pytest.mark.parametrize("shape,axis,params", [
    ((4, 6), 1, "both"), ((2, 3, 4), 1, "both"), ((2, 3, 4), 2, "scale"),
    ((1, 5), 1, "none"), ((3, 2, 2, 3), 2, "bias")])
def test_layer_norm(rng, shape, axis, params):
    d = int(np.prod(shape[axis:]))
    inputs = {"X": r(rng, *shape) * 3 + 1}
    if params in ("both", "scale"):
        inputs["Scale"] = r(rng, d)
    if params in ("both", "bias"):
        inputs["Bias"] = r(rng, d)
    attrs = {"begin_norm_axis": axis, "epsilon": 1e-5}
    check_op("layer_norm", inputs, attrs, reference=ref_layer_norm, rtol=1e-4, atol=1e-5)
    check_grad_through("layer_norm", inputs, attrs, wrt=list(inputs), through=["Y"],
                       rtol=1e-4, atol=1e-6)


def test_layer_norm_errors(rng):
    with pytest.raises(ShapeError, match="begin_norm_axis=2"):
        run_forward("layer_norm", {"X": r(rng, 3, 4)}, {"begin_norm_axis": 2})
    with pytest.raises(ShapeError, match=r"Scale \[5\] must be \[12\]"):
        run_forward("layer_norm", {"X": r(rng, 2, 3, 4), "Scale": r(rng, 5)})
