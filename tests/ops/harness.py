"""The op-test harness: every op's forward against a NumPy reference, its shape rule
against what the kernel produced, and every gradient against central finite differences
in float64. Every op the harness runs also runs on a device array module (`device.py`:
the CuPy stand-in, or CuPy itself with ``FLUID_TEST_DEVICE=cupy``) and must give the same
results there without moving data between host and device.

    check_op("mul", {"X": x, "Y": y}, {"x_num_col_dims": 1}, reference=lambda X, Y, **a: X @ Y)
    check_grad("mul", {"X": x, "Y": y}, {}, wrt=["X", "Y"])
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import get_spec, infer_op
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.spec import GradContext, TensorType

from .device import run_on_device

Arrays = Mapping[str, Any]  # slot -> array, or list of arrays for duplicable slots


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def build_op(op_type: str, inputs: Arrays, attrs: dict | None = None,
             output_counts: Mapping[str, int] | None = None
             ) -> tuple[OpDesc, dict[str, np.ndarray]]:
    """An OpDesc whose input vars are named ``<slot>_<i>`` and an env holding them."""
    spec = get_spec(op_type)
    env, ins = {}, {}
    for slot, value in inputs.items():
        names = []
        for i, a in enumerate(_as_list(value)):
            name = f"{slot}_{i}"
            env[name] = np.asarray(a)
            names.append(name)
        ins[slot] = names
    counts = dict(output_counts or {})
    outs = {}
    for s in spec.outputs:
        n = counts.get(s.name, 0 if s.optional else 1)
        if n:
            outs[s.name] = [f"out_{s.name}_{i}" for i in range(n)]
    return OpDesc(op_type, ins, outs, dict(attrs or {})), env


def run_forward(op_type: str, inputs: Arrays, attrs: dict | None = None,
                output_counts: Mapping[str, int] | None = None, rng=None
                ) -> dict[str, list[np.ndarray]]:
    op, env = build_op(op_type, inputs, attrs, output_counts)
    host_inputs = dict(env)
    run_ops([op], env, rng=rng)
    run_on_device([op], host_inputs, env)
    return {slot: [env[n] for n in names] for slot, names in op.outputs.items()}


def check_shape_rule(op: OpDesc, env: Mapping[str, np.ndarray],
                     batch_unknown: bool = True) -> None:
    """The shape rule agrees with the kernel with concrete shapes, and — with the leading
    dimension of every input unknown (-1), as while tracing — it still gives outputs of the
    right rank whose known dims match the kernel's."""
    def concrete(n):
        return TensorType(tuple(env[n].shape), env[n].dtype.name)
    types = infer_op(op, concrete)
    for slot, names in op.outputs.items():
        for name, t in zip(names, types[slot]):
            got = env[name]
            assert tuple(got.shape) == t.shape, (op.type, slot, got.shape, t.shape)
            assert got.dtype.name == t.dtype, (op.type, slot, got.dtype, t.dtype)
    inputs = op.input_names()
    # A leading dim of 1 may be squeezed or broadcast: unknown, it would change the meaning.
    if not batch_unknown or not inputs or any(np.ndim(env[n]) == 0 or np.shape(env[n])[0] == 1
                                              for n in inputs):
        return

    def traced(n):
        t = concrete(n)
        return TensorType((-1,) + t.shape[1:], t.dtype)
    types = infer_op(op, traced)
    for slot, names in op.outputs.items():
        for name, t in zip(names, types[slot]):
            got = env[name].shape
            assert len(t.shape) == len(got), (op.type, slot, "rank with batch unknown", t.shape)
            assert all(d < 0 or d == g for d, g in zip(t.shape, got)), (
                op.type, slot, "dims with batch unknown", t.shape, got)


def check_op(op_type: str, inputs: Arrays, attrs: dict | None = None,
             reference: Callable[..., Any] | None = None,
             output_counts: Mapping[str, int] | None = None,
             rtol: float = 1e-5, atol: float = 1e-6, rng=None, batch_unknown: bool = True
             ) -> dict[str, list[np.ndarray]]:
    """Run ``op_type`` once; compare with ``reference(**inputs, **attrs)``, which returns
    an array (for the first output slot) or a dict slot -> array(s). ``batch_unknown=False``
    skips the trace-time shape check for ops whose leading dim is not a batch dim."""
    op, env = build_op(op_type, inputs, attrs, output_counts)
    host_inputs = dict(env)
    run_ops([op], env, rng=rng)
    run_on_device([op], host_inputs, env)
    check_shape_rule(op, env, batch_unknown)
    got = {slot: [env[n] for n in names] for slot, names in op.outputs.items()}
    if reference is not None:
        full = get_spec(op_type).full_attrs(attrs or {})
        expected = reference(**dict(inputs), **full)
        if not isinstance(expected, dict):
            expected = {get_spec(op_type).outputs[0].name: expected}
        for slot, value in expected.items():
            for g, e in zip(got[slot], _as_list(value)):
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol,
                                           err_msg=f"{op_type} output {slot}")
    return got


def analytic_grads(op: OpDesc, env: dict[str, np.ndarray], cotangents: Mapping[str, np.ndarray],
                   wrt: Sequence[str]) -> dict[str, list[np.ndarray | None]]:
    """Run the op's gradient maker and the ops it emits; returns slot -> gradients."""
    spec = get_spec(op.type)
    env = dict(env)
    out_grads = {}
    for slot, names in op.outputs.items():
        out_grads[slot] = []
        for n in names:
            g = n + "@GRAD"
            env[g] = cotangents[n]
            out_grads[slot].append(g)
    in_grads = {slot: [(n + "@GRAD" if slot in wrt else None) for n in names]
                for slot, names in op.inputs.items()}
    emitted: list[OpDesc] = []
    counter = iter(range(10 ** 6))

    def emit(type_, inputs, outputs, attrs):
        emitted.append(OpDesc(type_, inputs, outputs, attrs))

    spec.grad(GradContext(op, spec.full_attrs(op.attrs), out_grads, in_grads, emit,
                          lambda hint: f"{hint}@tmp{next(counter)}"))
    before = dict(env)
    run_ops(emitted, env)
    run_on_device(emitted, before, env)
    for e in emitted:
        check_shape_rule(e, env)
    return {slot: [env.get(n) if n else None for n in names] for slot, names in in_grads.items()}


def check_grad(op_type: str, inputs: Arrays, attrs: dict | None = None,
               wrt: Sequence[str] = ("X",), output_counts: Mapping[str, int] | None = None,
               eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7,
               max_elements: int = 40, seed: int = 0,
               through: Sequence[str] | None = None) -> None:
    """Gradients of sum(out * cotangent) w.r.t. the slots in ``wrt``, analytic against
    central differences, all in float64 (float inputs are promoted). ``through`` names the
    output slots that get a cotangent (default: all); the others get zeros (outputs an op
    keeps for its gradient, through which no gradient flows by design)."""
    rng = np.random.default_rng(seed)
    promoted = {}
    for slot, v in inputs.items():
        vals = [np.asarray(a) for a in _as_list(v)]
        vals = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in vals]
        promoted[slot] = vals if isinstance(v, (list, tuple)) else vals[0]
    op, env = build_op(op_type, promoted, attrs, output_counts)
    run_ops([op], env)
    outs = op.output_names()
    carried = {n for slot, names in op.outputs.items() if through is None or slot in through
               for n in names}
    cot = {n: rng.standard_normal(np.shape(env[n])) for n in outs
           if np.asarray(env[n]).dtype.kind == "f" and n in carried}
    for n in outs:
        cot.setdefault(n, np.zeros(np.shape(env[n])))
    grads = analytic_grads(op, env, cot, wrt)

    def objective(e: dict) -> float:
        run_ops([op], e)
        return float(sum(np.sum(np.asarray(e[n], dtype=np.float64) * cot[n]) for n in outs))

    for slot in wrt:
        for name, g in zip(op.inputs[slot], grads[slot]):
            assert g is not None, f"{op_type}: no gradient for {slot}"
            x = env[name]
            assert np.shape(g) == np.shape(x), (op_type, slot, np.shape(g), np.shape(x))
            flat = np.arange(x.size)
            if x.size > max_elements:
                flat = rng.choice(x.size, max_elements, replace=False)
            numeric = np.empty(len(flat))
            for k, i in enumerate(flat):
                e = dict(env)
                xp_, xm_ = x.copy(), x.copy()
                xp_.flat[i] += eps
                xm_.flat[i] -= eps
                e[name] = xp_
                fp = objective(e)
                e = dict(env)
                e[name] = xm_
                fm = objective(e)
                numeric[k] = (fp - fm) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g).reshape(-1)[flat], numeric, rtol=rtol,
                                       atol=atol, err_msg=f"{op_type} gradient of {slot}")
