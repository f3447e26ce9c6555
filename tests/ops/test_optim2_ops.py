"""The update ops beyond sgd/momentum/adam against NumPy transcriptions of Paddle 1.8's
update ops (the inputs and attrs of Paddle's own op tests), in float64: adagrad,
decayed_adagrad, rmsprop, adadelta, adamax, ftrl, lamb, lars_momentum, dpsgd,
average_accumulates, ema_accumulate, lookahead. Then the fused forms against the
per-parameter ops, bit for bit over chained steps, and the shape rules' errors."""
import numpy as np
import pytest
from ops.harness import build_op, check_op

from fluid_interactive.errors import ShapeError
from fluid_interactive.ops import get_spec, infer_op, prepare_kernel
from fluid_interactive.ops.optim_fused import fused_slot
from fluid_interactive.ops.spec import TensorType

f32 = np.float32
SHAPE = (102, 105)   # Paddle's op tests' shape


def u(rng, low=-1.0, high=1.0, shape=SHAPE):
    return rng.uniform(low, high, shape).astype(f32)


def lr(value):
    return np.array([value], f32)


def f64(a):
    return np.asarray(a, np.float64)


# --- references (Paddle 1.8's update ops, in float64) ---------------------------------------

def adagrad_ref(Param, Grad, Moment, LearningRate, epsilon, **_):
    m = f64(Moment) + f64(Grad) ** 2
    return {"ParamOut": Param - LearningRate * Grad / (np.sqrt(m) + epsilon), "MomentOut": m}


def decayed_adagrad_ref(Param, Grad, Moment, LearningRate, decay, epsilon, **_):
    m = decay * f64(Moment) + (1 - decay) * f64(Grad) ** 2
    return {"ParamOut": Param - LearningRate * Grad / (np.sqrt(m) + epsilon), "MomentOut": m}


def rmsprop_ref(Param, Grad, Moment, MeanSquare, MeanGrad, LearningRate, decay, epsilon,
                momentum, centered, **_):
    g = f64(Grad)
    ms = decay * f64(MeanSquare) + (1 - decay) * g * g
    mg = decay * f64(MeanGrad) + (1 - decay) * g if centered else f64(MeanGrad)
    d = ms - mg * mg if centered else ms
    mom = momentum * f64(Moment) + LearningRate * g / np.sqrt(d + epsilon)
    return {"ParamOut": Param - mom, "MomentOut": mom, "MeanSquareOut": ms, "MeanGradOut": mg}


def adadelta_ref(Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, rho, epsilon, **_):
    g = f64(Grad)
    a = rho * f64(AvgSquaredGrad) + (1 - rho) * g * g
    update = -np.sqrt((AvgSquaredUpdate + epsilon) / (a + epsilon)) * g
    return {"ParamOut": Param + update, "AvgSquaredGradOut": a,
            "AvgSquaredUpdateOut": rho * f64(AvgSquaredUpdate) + (1 - rho) * update ** 2}


def adamax_ref(Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow, beta1, beta2, epsilon,
               **_):
    g = f64(Grad)
    m = beta1 * f64(Moment) + (1 - beta1) * g
    inf = np.maximum(np.abs(g), beta2 * f64(InfNorm) + epsilon)
    return {"ParamOut": Param - LearningRate / (1 - Beta1Pow) * (m / inf), "MomentOut": m,
            "InfNormOut": inf, "Beta1PowOut": Beta1Pow * beta1}


def ftrl_ref(Param, Grad, LearningRate, SquaredAccumulator, LinearAccumulator, l1, l2,
             lr_power, **_):
    g, sq, p = f64(Grad), f64(SquaredAccumulator), f64(Param)
    new = sq + g * g
    lin = LinearAccumulator + g - ((new ** -lr_power - sq ** -lr_power) / LearningRate) * p
    x = l1 * np.sign(lin) - lin
    y = new ** -lr_power / LearningRate + 2 * l2
    return {"ParamOut": np.where(np.abs(lin) > l1, x / y, 0.0),
            "SquaredAccumulatorOut": new, "LinearAccumulatorOut": lin}


def lamb_ref(Param, Grad, LearningRate, Moment1, Moment2, beta1, beta2, epsilon,
             weight_decay, **_):
    g, p = f64(Grad), f64(Param)
    m1 = beta1 * f64(Moment1) + (1 - beta1) * g
    m2 = beta2 * f64(Moment2) + (1 - beta2) * g * g
    r = m1 / (np.sqrt(m2) + epsilon) + weight_decay * p
    ratio = np.linalg.norm(p) / np.linalg.norm(r)
    return {"ParamOut": p - LearningRate * ratio * r, "Moment1Out": m1, "Moment2Out": m2}


def lars_ref(Param, Grad, Velocity, LearningRate, mu, lars_coeff, lars_weight_decay, **_):
    p, g = f64(Param), f64(Grad)
    pn, gn = np.linalg.norm(p), np.linalg.norm(g)
    local = LearningRate * lars_coeff * pn / (gn + lars_weight_decay * pn)
    v = mu * Velocity + local * (g + lars_weight_decay * p)
    return {"ParamOut": p - v, "VelocityOut": v}


# --- one step, Paddle's inputs --------------------------------------------------------------

@pytest.mark.parametrize("epsilon", [1e-8, 1e-6])
def test_adagrad(rng, epsilon):
    check_op("adagrad", {"Param": u(rng, 0, 1), "Grad": u(rng, 0, 1),
                         "Moment": np.zeros(SHAPE, f32), "LearningRate": lr(0.01)},
             {"epsilon": epsilon}, reference=adagrad_ref)


@pytest.mark.parametrize("decay,epsilon", [(0.8, 1e-8), (0.95, 1e-6)])
def test_decayed_adagrad(rng, decay, epsilon):
    check_op("decayed_adagrad", {"Param": u(rng, 0, 1), "Grad": u(rng, 0, 1),
                                 "Moment": u(rng, 0, 1), "LearningRate": lr(0.01)},
             {"decay": decay, "epsilon": epsilon}, reference=decayed_adagrad_ref)


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("epsilon", [1e-6, 1e-4])
def test_rmsprop(rng, centered, epsilon):
    inputs = {"Param": u(rng, 0, 1), "Grad": u(rng, 0, 1), "Moment": u(rng, 0, 1),
              "MeanSquare": u(rng, 1, 2), "MeanGrad": u(rng, 0, 1), "LearningRate": lr(0.01)}
    got = check_op("rmsprop", inputs, {"decay": 0.9, "momentum": 0.1, "epsilon": epsilon,
                                       "centered": centered}, reference=rmsprop_ref)
    if not centered:   # the mean gradient is kept as it was, in a fresh array
        np.testing.assert_array_equal(got["MeanGradOut"][0], inputs["MeanGrad"])


def test_adadelta_has_no_learning_rate(rng):
    inputs = {"Param": u(rng), "Grad": u(rng), "AvgSquaredGrad": u(rng, 0, 1),
              "AvgSquaredUpdate": u(rng, 0, 1)}
    check_op("adadelta", inputs, {"rho": 0.95, "epsilon": 1e-6}, reference=adadelta_ref)
    assert "LearningRate" not in [s.name for s in get_spec("adadelta").inputs]


@pytest.mark.parametrize("beta1,beta2,epsilon,t", [(0.78, 0.899, 1e-5, 10),
                                                   (0.9, 0.999, 1e-8, 8)])
def test_adamax(rng, beta1, beta2, epsilon, t):
    inputs = {"Param": u(rng), "Grad": u(rng), "LearningRate": lr(0.002), "Moment": u(rng),
              "InfNorm": u(rng, 0, 1), "Beta1Pow": np.array([beta1 ** t], f32)}
    check_op("adamax", inputs, {"beta1": beta1, "beta2": beta2, "epsilon": epsilon},
             reference=adamax_ref)


@pytest.mark.parametrize("lr_power", [-0.5, -0.3])
def test_ftrl(rng, lr_power):
    inputs = {"Param": u(rng, 0, 1), "Grad": u(rng, 0, 1), "LearningRate": lr(0.01),
              "SquaredAccumulator": np.full(SHAPE, 0.1, f32),
              "LinearAccumulator": np.full(SHAPE, 0.1, f32)}
    check_op("ftrl", inputs, {"l1": 0.1, "l2": 0.2, "lr_power": lr_power},
             reference=ftrl_ref, rtol=1e-4, atol=2e-5)   # float32 cancellation (terms ~20)


def test_ftrl_zero_gradients_give_zero_not_nan():
    """A unit that never had a gradient (a dead relu): the denominator is 0, and the
    parameter is 0, as Paddle's select gives."""
    z = np.zeros((2, 3), f32)
    got = check_op("ftrl", {"Param": z, "Grad": z, "LearningRate": lr(0.1),
                            "SquaredAccumulator": z, "LinearAccumulator": z}, {})
    np.testing.assert_array_equal(got["ParamOut"][0], z)


@pytest.mark.parametrize("attrs", [{"epsilon": 1e-4, "beta1": 0.78, "beta2": 0.836,
                                    "weight_decay": 0.01},
                                   {"epsilon": 1e-8, "beta1": 0.9, "beta2": 0.999,
                                    "weight_decay": 0.01}])
def test_lamb(rng, attrs):
    inputs = {"Param": u(rng), "Grad": u(rng), "Moment1": u(rng), "Moment2": u(rng, 0, 1),
              "LearningRate": lr(0.001), "Beta1Pow": np.array([attrs["beta1"] ** 10], f32),
              "Beta2Pow": np.array([attrs["beta2"] ** 10], f32)}
    check_op("lamb", inputs, attrs, reference=lamb_ref)


def test_lamb_and_lars_with_a_zero_parameter_take_the_plain_rate():
    g = np.full((2, 2), 0.5, f32)
    z = np.zeros((2, 2), f32)
    got = check_op("lamb", {"Param": z, "Grad": g, "Moment1": z, "Moment2": z,
                            "LearningRate": lr(0.1)}, {"beta1": 0.0, "beta2": 0.0,
                                                       "epsilon": 0.0, "weight_decay": 0.0})
    np.testing.assert_allclose(got["ParamOut"][0], np.full((2, 2), -0.1), rtol=1e-6)
    got = check_op("lars_momentum", {"Param": z, "Grad": g, "Velocity": z,
                                     "LearningRate": lr(0.1)}, {"mu": 0.9})
    np.testing.assert_allclose(got["VelocityOut"][0], np.full((2, 2), 0.05), rtol=1e-6)


def test_lars_momentum(rng):
    inputs = {"Param": u(rng), "Grad": u(rng), "Velocity": u(rng), "LearningRate": lr(0.1)}
    check_op("lars_momentum", inputs, {"mu": 0.0001, "lars_coeff": 0.001,
                                       "lars_weight_decay": 0.0005}, reference=lars_ref)


def test_dpsgd_without_noise_is_clipped_sgd(rng):
    inputs = {"Param": u(rng), "Grad": u(rng), "LearningRate": lr(0.001)}
    check_op("dpsgd", inputs, {"clip": 10000.0, "batch_size": 16.0, "sigma": 0.0},
             reference=lambda Param, Grad, LearningRate, **_: Param - LearningRate * Grad,
             rng=np.random.default_rng(0))
    norm = np.linalg.norm(f64(inputs["Grad"]))
    check_op("dpsgd", inputs, {"clip": 1.0, "batch_size": 16.0, "sigma": 0.0},
             reference=lambda Param, Grad, LearningRate, **_:
             Param - LearningRate * Grad / norm, rng=np.random.default_rng(0))


def test_dpsgd_noise_comes_from_the_ops_generator(rng):
    inputs = {"Param": u(rng, shape=(3, 4)), "Grad": u(rng, shape=(3, 4)),
              "LearningRate": lr(0.5)}
    attrs = {"clip": 100.0, "batch_size": 4.0, "sigma": 2.0}
    noise = 2.0 * np.random.default_rng(7).standard_normal()
    check_op("dpsgd", inputs, attrs, rng=np.random.default_rng(7),
             reference=lambda Param, Grad, LearningRate, **_:
             Param - LearningRate * (Grad + noise / 4.0))
    seeded = 2.0 * np.random.default_rng(11).standard_normal()
    check_op("dpsgd", inputs, {**attrs, "seed": 11}, rng=np.random.default_rng(0),
             reference=lambda Param, Grad, LearningRate, **_:
             Param - LearningRate * (Grad + seeded / 4.0))


# --- averages and lookahead -----------------------------------------------------------------

def average_ref(param, s1, s2, s3, acc, old, upd, window, low, high):
    """Paddle's average_accumulates kernel, by hand."""
    upd, acc = upd + 1, acc + 1
    o1, o2, o3 = s1 + param, s2, s3
    if upd % 16384 == 0:
        o2, o1 = s2 + s1, np.zeros_like(s1)
    if acc >= low and acc >= min(high, int(upd * window)):
        o3, o1, o2 = s1 + s2, np.zeros_like(s1), np.zeros_like(s1)
        old, acc = acc, 0
    return o1, o2, o3, acc, old, upd


@pytest.mark.parametrize("window,low,high", [(0.5, 2, 4), (0.15, 1, 3), (1.0, 3, 3)])
def test_average_accumulates_over_steps(rng, window, low, high):
    shape = (3, 2)
    sums = [np.zeros(shape, f32) for _ in range(3)]
    counts = [np.zeros(1, np.int64) for _ in range(3)]
    ref = [np.zeros(shape) for _ in range(3)] + [0, 0, 0]
    attrs = {"average_window": window, "min_average_window": low, "max_average_window": high}
    for _ in range(9):
        p = u(rng, shape=shape)
        inputs = {"param": p, "in_sum_1": sums[0], "in_sum_2": sums[1], "in_sum_3": sums[2],
                  "in_num_accumulates": counts[0], "in_old_num_accumulates": counts[1],
                  "in_num_updates": counts[2]}
        got = check_op("average_accumulates", inputs, attrs, batch_unknown=False)
        ref = list(average_ref(p, *ref, window, low, high))
        sums = [got[f"out_sum_{k}"][0] for k in (1, 2, 3)]
        counts = [got[s][0] for s in ("out_num_accumulates", "out_old_num_accumulates",
                                      "out_num_updates")]
        for a, b in zip(sums + counts, ref):
            np.testing.assert_allclose(a, np.reshape(b, np.shape(a)), rtol=1e-6)


def test_ema_accumulate(rng):
    inputs = {"Param": u(rng, shape=(4, 3)), "Average": u(rng, shape=(4, 3)),
              "Decay": np.array([0.9], f32)}
    check_op("ema_accumulate", inputs, reference=lambda Param, Average, Decay, **_:
             Average * 0.9 + Param * 0.1)


@pytest.mark.parametrize("step,synced", [(4, False), (5, True), (10, True)])
def test_lookahead_blends_every_kth_step(rng, step, synced):
    fast, slow = u(rng, shape=(3, 4)), u(rng, shape=(3, 4))
    blend = 0.3 * f64(fast) + 0.7 * f64(slow)
    got = check_op("lookahead", {"Param": fast, "Slow": slow,
                                 "Step": np.array([step], np.int64)}, {"alpha": 0.3, "k": 5},
                   reference=lambda **_: {"ParamOut": blend if synced else fast,
                                          "SlowOut": blend if synced else slow})
    if not synced:
        np.testing.assert_array_equal(got["ParamOut"][0], fast)


# --- fused forms: bit-identical to the per-parameter ops ------------------------------------

SHAPES = [(3, 4), (4,), (2, 3, 2), (1,)]
FUSED = {
    "adagrad": ({"epsilon": 1e-6}, {"Moment": "abs"}),
    "decayed_adagrad": ({"decay": 0.9, "epsilon": 1e-6}, {"Moment": "abs"}),
    "rmsprop": ({"decay": 0.9, "epsilon": 1e-6, "momentum": 0.5, "centered": False},
                {"Moment": "any", "MeanSquare": "abs", "MeanGrad": "any"}),
    "rmsprop_centered": ({"decay": 0.9, "epsilon": 1e-3, "momentum": 0.5, "centered": True},
                         {"Moment": "any", "MeanSquare": "big", "MeanGrad": "small"}),
    "adadelta": ({"rho": 0.9, "epsilon": 1e-6},
                 {"AvgSquaredGrad": "abs", "AvgSquaredUpdate": "abs"}),
    "adamax": ({"beta1": 0.8, "beta2": 0.9, "epsilon": 1e-6},
               {"Moment": "any", "InfNorm": "abs", "Beta1Pow": "pow"}),
    "ftrl": ({"l1": 0.1, "l2": 0.2}, {"SquaredAccumulator": "abs", "LinearAccumulator": "any"}),
    "ftrl_power": ({"l1": 0.01, "l2": 0.1, "lr_power": -0.3},
                   {"SquaredAccumulator": "abs", "LinearAccumulator": "any"}),
}


def _value(rng, kind, shape):
    if kind == "pow":
        return np.array([0.8 ** 3], f32)
    v = rng.standard_normal(shape).astype(f32)
    return {"abs": np.abs(v), "big": np.abs(v) + 2, "small": 0.1 * v}.get(kind, v)


def fused_case(case):
    attrs, states = FUSED[case]
    return case.split("_centered")[0].split("_power")[0], attrs, states


def _fused_kernel(op_type, inputs, attrs):
    n = len(inputs["Params"])
    counts = {s.name: n for s in get_spec(op_type).outputs}
    op, env = build_op(op_type, inputs, attrs, counts)
    types = {k: TensorType(a.shape, a.dtype.name) for k, a in env.items()}
    for slot, ts in infer_op(op, types.__getitem__).items():
        types.update(zip(op.outputs[slot], ts))
    return op, prepare_kernel(op, types.__getitem__, np)


def run_fused_and_unfused(rng, case, steps=3, kernel=None):
    """Chain ``steps`` steps of the fused kernel (its outputs fed back, as the scope does)
    and of the per-parameter op; returns the pairs of final outputs."""
    base, attrs, states = fused_case(case)
    spec = get_spec(base)
    per = [{s: _value(rng, k, shape) for s, k in states.items()} |
           {"Param": rng.standard_normal(shape).astype(f32)} for shape in SHAPES]
    has_lr = "LearningRate" in spec.fused_shared
    rate = {"LearningRate": lr(0.05)} if has_lr else {}
    fused_in = {fused_slot(spec, s): [p[s] for p in per] for s in ["Param", *states]}
    op, fn = _fused_kernel(spec.fused, {**fused_in, "Grads": [p["Param"] for p in per],
                                        **rate}, attrs)
    kernel = kernel or fn
    order = [s.name for s in get_spec(spec.fused).inputs]
    for _ in range(steps):
        grads = [rng.standard_normal(p["Param"].shape).astype(f32) for p in per]
        expected = []
        for p, g in zip(per, grads):
            got = check_op(base, {**p, "Grad": g, **rate}, attrs)
            expected.append({k: v[0] for k, v in got.items()})
        args = {**fused_in, "Grads": grads, **({"LearningRate": [rate["LearningRate"]]}
                                               if has_lr else {})}
        result = kernel(*[a for slot in order for a in args[slot]])
        outs = [s.name for s in get_spec(spec.fused).outputs]
        got = dict(zip([(s, i) for s in outs for i in range(len(per))], result))
        for s in spec.outputs:
            for i in range(len(per)):
                np.testing.assert_array_equal(got[(fused_slot(spec, s.name), i)],
                                              expected[i][s.name], err_msg=f"{case} {s.name}")
        for s in ["Param", *states]:
            fused_in[fused_slot(spec, s)] = [got[(fused_slot(spec, s + "Out"), i)]
                                             for i in range(len(per))]
            for i, p in enumerate(per):
                p[s] = expected[i][s + "Out"]
    return fused_in, per


@pytest.mark.parametrize("case", sorted(FUSED))
def test_fused_equals_unfused_bit_for_bit_over_steps(rng, case):
    run_fused_and_unfused(rng, case)


@pytest.mark.parametrize("case", sorted(FUSED))
def test_fused_ops_through_the_harness(rng, case):
    """Each fused op once through check_op (and so on the device module), against the
    per-parameter op."""
    base, attrs, states = fused_case(case)
    spec = get_spec(base)
    per = [{s: _value(rng, k, shape) for s, k in states.items()} |
           {"Param": rng.standard_normal(shape).astype(f32),
            "Grad": rng.standard_normal(shape).astype(f32)} for shape in SHAPES[:2]]
    rate = {"LearningRate": lr(0.05)} if "LearningRate" in spec.fused_shared else {}
    inputs = {fused_slot(spec, s): [p[s] for p in per] for s in ["Param", "Grad", *states]}
    got = check_op(spec.fused, {**inputs, **rate}, attrs, batch_unknown=False,
                   output_counts={s.name: 2 for s in get_spec(spec.fused).outputs})
    for i, p in enumerate(per):
        one = check_op(base, {**p, **rate}, attrs)
        for s in spec.outputs:
            np.testing.assert_array_equal(got[fused_slot(spec, s.name)][i], one[s.name][0])


def test_fused_adamax_with_different_powers_runs_per_parameter(rng):
    spec = get_spec("adamax")
    params = [rng.standard_normal(s).astype(f32) for s in SHAPES[:2]]
    pows = [np.array([0.9], f32), np.array([0.81], f32)]
    inputs = {"Params": params, "Grads": params, "LearningRate": lr(0.1),
              "Moments": [np.zeros_like(p) for p in params],
              "InfNorms": [np.ones_like(p) for p in params], "Beta1Pows": pows}
    got = check_op(spec.fused, inputs, {}, batch_unknown=False,
                   output_counts={s.name: 2 for s in get_spec(spec.fused).outputs})
    for i, p in enumerate(params):
        one = check_op("adamax", {"Param": p, "Grad": p, "LearningRate": lr(0.1),
                                  "Moment": np.zeros_like(p), "InfNorm": np.ones_like(p),
                                  "Beta1Pow": pows[i]}, {})
        np.testing.assert_array_equal(got["ParamOuts"][i], one["ParamOut"][0])


# --- shape rules ----------------------------------------------------------------------------

@pytest.mark.parametrize("op_type,inputs,message", [
    ("adagrad", {"Param": np.zeros((2, 3), f32), "Grad": np.zeros((2, 3), f32),
                 "Moment": np.zeros((3, 2), f32), "LearningRate": lr(0.1)},
     r"Moment float32\[3, 2\] must have Param's shape"),
    ("rmsprop", {"Param": np.zeros(3, f32), "Grad": np.zeros(4, f32),
                 "Moment": np.zeros(3, f32), "MeanSquare": np.zeros(3, f32),
                 "MeanGrad": np.zeros(3, f32), "LearningRate": lr(0.1)}, "must match"),
    ("adamax", {"Param": np.zeros(3, f32), "Grad": np.zeros(3, f32),
                "LearningRate": lr(0.1), "Moment": np.zeros(3, f32),
                "InfNorm": np.zeros(3, f32), "Beta1Pow": np.zeros(2, f32)},
     "Beta1Pow must hold a single value"),
    ("lookahead", {"Param": np.zeros(3, f32), "Slow": np.zeros(3, f32),
                   "Step": np.zeros(1, f32)}, "Step must be an integer counter"),
    ("average_accumulates", {"param": np.zeros(3, f32), "in_sum_1": np.zeros(3, f32),
                             "in_sum_2": np.zeros(3, f32), "in_sum_3": np.zeros(2, f32),
                             "in_num_accumulates": np.zeros(1, np.int64),
                             "in_old_num_accumulates": np.zeros(1, np.int64),
                             "in_num_updates": np.zeros(1, np.int64)}, "in_sum_3"),
])
def test_shape_rules_name_the_mismatch(op_type, inputs, message):
    with pytest.raises(ShapeError, match=message):
        check_op(op_type, inputs)


def test_norm_updates_say_they_read_whole_tensors():
    for op_type in ("lamb", "lars_momentum", "dpsgd"):
        assert get_spec(op_type).reads_whole and not get_spec(op_type).fused
    for op_type in ("adagrad", "rmsprop", "adamax", "ftrl", "adadelta", "decayed_adagrad"):
        assert not get_spec(op_type).reads_whole and get_spec(op_type).fused
