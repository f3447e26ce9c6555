"""Fused optimizer updates against the per-parameter ops: bit-identical values over several
chained steps, whether the state comes back as the fused op's own outputs or was set from
outside; outputs a caller still holds are never written again; unreferenced ones are
recycled."""
import gc

import numpy as np
import pytest
from ops.harness import build_op, check_op

from fluid_interactive.ops import get_spec, infer_op, prepare_kernel
from fluid_interactive.ops.optim_fused import fused_slot
from fluid_interactive.ops.spec import TensorType

f32 = np.float32
SHAPES = [(3, 4), (4,), (2, 3, 2), (1,)]
CASES = {
    "sgd": ({}, ["Param", "Grad"], []),
    "momentum": ({"mu": 0.8}, ["Param", "Grad", "Velocity"], []),
    "nesterov": ({"mu": 0.8, "use_nesterov": True}, ["Param", "Grad", "Velocity"], []),
    "adam": ({"beta1": 0.8, "beta2": 0.9, "epsilon": 1e-6},
             ["Param", "Grad", "Moment1", "Moment2"], ["Beta1Pow", "Beta2Pow"]),
}


def _state(rng, slots, pows, attrs):
    per = [{s: rng.standard_normal(shape).astype(f32) ** (2 if s == "Moment2" else 1)
            for s in slots} for shape in SHAPES]
    for p in per:
        p.update({"Beta1Pow": np.array([attrs.get("beta1", 0.9) ** 3], f32),
                  "Beta2Pow": np.array([attrs.get("beta2", 0.999) ** 3], f32)}
                 if pows else {})
    return per


def _counts(op_type, n):
    return {s.name: n for s in get_spec(op_type).outputs}


def _kernel(op_type, inputs, attrs):
    n = len(inputs["Params"])
    op, env = build_op(op_type, inputs, attrs, _counts(op_type, n))
    types = {k: TensorType(a.shape, a.dtype.name) for k, a in env.items()}
    for slot, ts in infer_op(op, types.__getitem__).items():
        types.update(zip(op.outputs[slot], ts))
    return op, prepare_kernel(op, types.__getitem__, np)


def _unfused_step(base, per, lr, attrs):
    outs = []
    for p in per:
        got = check_op(base, {**p, "LearningRate": lr}, attrs)
        outs.append({slot: v[0] for slot, v in got.items()})
    return outs


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_equals_unfused_bit_for_bit_over_steps(rng, case):
    attrs, slots, pows = CASES[case]
    base = "momentum" if case == "nesterov" else case
    spec = get_spec(base)
    per = _state(rng, slots, pows, attrs)
    lr = np.array([0.05], f32)
    state_slots = [s for s in spec.inputs if s.name not in ("Grad", "LearningRate")]
    fused_inputs = {fused_slot(spec, s.name): [p[s.name] for p in per]
                    for s in spec.inputs if s.name != "LearningRate"}
    fused_inputs["LearningRate"] = lr
    op, fn = _kernel(spec.fused, fused_inputs, attrs)
    order = [n for s in get_spec(spec.fused).inputs for n in op.inputs.get(s.name, ())]
    env = dict(zip(order, [a for s in get_spec(spec.fused).inputs
                           for a in (fused_inputs[s.name] if isinstance(fused_inputs[s.name], list)
                                     else [fused_inputs[s.name]])]))
    held = []
    for step in range(4):
        grads = [rng.standard_normal(p["Param"].shape).astype(f32) for p in per]
        for p, g in zip(per, grads):
            p["Grad"] = g
        expected = _unfused_step(base, per, lr, attrs)
        args = [env[n] for n in order]
        grad_names = op.inputs["Grads"]
        args = [grads[grad_names.index(n)] if n in grad_names else a
                for n, a in zip(order, args)]
        result = fn(*args)
        result = result if isinstance(result, tuple) else (result,)
        out_names = [n for s in get_spec(spec.fused).outputs for n in op.outputs[s.name]]
        got = dict(zip(out_names, result))
        for s in spec.outputs:
            for i, name in enumerate(op.outputs[fused_slot(spec, s.name)]):
                np.testing.assert_array_equal(got[name], expected[i][s.name],
                                              err_msg=f"{case} step {step} {s.name}[{i}]")
        if step == 1:
            held = [(a, a.copy()) for a in result]     # a caller (the scope) keeps these
        # the outputs come back as the next step's state, as the scope hands them back
        for s in state_slots:
            for i, name in enumerate(op.inputs[fused_slot(spec, s.name)]):
                out_slot = fused_slot(spec, s.name + "Out")
                env[name] = got[op.outputs[out_slot][i]]
                per[i][s.name] = expected[i][s.name + "Out"]
    for array, value in held:
        np.testing.assert_array_equal(array, value)    # never written again while held


def test_state_set_from_outside_is_copied_not_written(rng):
    spec = get_spec("sgd")
    params = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    lr = np.array([0.1], f32)
    op, fn = _kernel(spec.fused, {"Params": params, "Grads": grads, "LearningRate": lr}, {})
    before = [p.copy() for p in params]
    out = fn(*params, *grads, lr)
    for p, b, o, g in zip(params, before, out, grads):
        np.testing.assert_array_equal(p, b)                      # inputs untouched
        np.testing.assert_array_equal(o, b - g * lr)
        assert not np.shares_memory(o, p)


def test_unreferenced_generations_are_recycled(rng):
    spec = get_spec("sgd")
    params = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    lr = np.array([0.1], f32)
    op, fn = _kernel(spec.fused, {"Params": params, "Grads": grads, "LearningRate": lr}, {})
    state = list(params)
    memories = set()
    for _ in range(6):
        state = list(fn(*state, *grads, lr))   # the previous outputs are dropped here
        gc.collect()
        memories.add(state[0].__array_interface__["data"][0])
    assert len(memories) <= 2      # two generations take turns: no allocation per step


def test_gradients_laid_out_flat_are_read_in_place(rng):
    spec = get_spec("sgd")
    arena = rng.standard_normal(sum(int(np.prod(s)) for s in SHAPES)).astype(f32)
    grads, at = [], 0
    for s in SHAPES:
        n = int(np.prod(s))
        grads.append(arena[at:at + n].reshape(s))
        at += n
    params = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    lr = np.array([0.5], f32)
    op, fn = _kernel(spec.fused, {"Params": params, "Grads": grads, "LearningRate": lr}, {})
    out = fn(*params, *grads, lr)
    for o, p, g in zip(out, params, grads):
        np.testing.assert_array_equal(o, p - g * lr)


def test_fused_shape_rule_checks_every_parameter(rng):
    from fluid_interactive.errors import ShapeError
    with pytest.raises(ShapeError, match="must match"):
        check_op("fused_sgd", {"Params": [np.zeros((2, 3), f32), np.zeros(4, f32)],
                               "Grads": [np.zeros((2, 3), f32), np.zeros(5, f32)],
                               "LearningRate": np.array([0.1], f32)},
                 output_counts=_counts("fused_sgd", 2))
    got = check_op("fused_sgd", {"Params": [np.ones((2, 3), f32), np.ones(4, f32)],
                                 "Grads": [np.full((2, 3), 2, f32), np.full(4, 3, f32)],
                                 "LearningRate": np.array([0.5], f32)},
                   output_counts=_counts("fused_sgd", 2), batch_unknown=False)
    np.testing.assert_array_equal(got["ParamOuts"][1], np.full(4, -0.5, f32))
    check_op("fused_adam", {
        "Params": [np.ones((2, 3), f32), np.ones(4, f32)],
        "Grads": [np.ones((2, 3), f32), np.ones(4, f32)],
        "LearningRate": np.array([0.1], f32),
        "Moment1s": [np.zeros((2, 3), f32), np.zeros(4, f32)],
        "Moment2s": [np.zeros((2, 3), f32), np.zeros(4, f32)],
        "Beta1Pows": [np.array([0.9], f32)] * 2, "Beta2Pows": [np.array([0.999], f32)] * 2},
        output_counts=_counts("fused_adam", 2), batch_unknown=False)


@pytest.mark.parametrize("nesterov", [False, True])
def test_fused_momentum_through_the_harness(rng, nesterov):
    params = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    vel = [rng.standard_normal(s).astype(f32) for s in SHAPES]
    lr = np.array([0.1], f32)
    attrs = {"mu": 0.7, "use_nesterov": nesterov}
    got = check_op("fused_momentum", {"Params": params, "Grads": grads, "Velocitys": vel,
                                      "LearningRate": lr}, attrs,
                   output_counts=_counts("fused_momentum", len(SHAPES)), batch_unknown=False)
    for i, (p, g, v) in enumerate(zip(params, grads, vel)):
        one = check_op("momentum", {"Param": p, "Grad": g, "Velocity": v, "LearningRate": lr},
                       attrs)
        np.testing.assert_array_equal(got["ParamOuts"][i], one["ParamOut"][0])
        np.testing.assert_array_equal(got["VelocityOuts"][i], one["VelocityOut"][0])
