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
            # a -1 with concrete inputs: a size that depends on values (nonzero, unique)
            assert len(got.shape) == len(t.shape) and all(
                d < 0 or d == g for d, g in zip(t.shape, got.shape)), (
                op.type, slot, got.shape, t.shape)
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


# --- ops owning sub-blocks: whole traced programs -------------------------------------------

def _program_class(build: Callable[[], Any], feeds: Sequence[str], cotangents: Mapping):
    """A `fluid.Program` whose method ``f`` runs ``build()`` and, with ``cotangents``
    (output index -> array), also returns the gradients of sum(out * cotangent) with
    respect to the data vars listed in ``cotangents['wrt']``."""
    import fluid
    from fluid_interactive.frontend.tracing import current_trace

    cot_names = [f"cotangent_{k}" for k in cotangents.get("values", {})]

    class Checked(fluid.Program):
        @fluid.network(*feeds, *cot_names)
        def f(self):
            outs = _as_list(build())
            if not cot_names:
                return tuple(outs)
            terms = []
            for (k, value), name in zip(cotangents["values"].items(), cot_names):
                c = fluid.layers.data(name, shape=list(value.shape), dtype="float64",
                                      append_batch_size=False)
                terms.append(fluid.layers.reduce_sum(outs[k] * c))
            loss = terms[0] if len(terms) == 1 else fluid.layers.sums(terms)
            trace = current_trace()
            wrt = [fluid.Variable(trace, n) for n in cotangents["wrt"]]
            grads = fluid.gradients(loss, wrt)
            return tuple(outs) + (loss,) + tuple(grads)
    return Checked, cot_names


def _interpret(prog, args: dict, xp: Any = np) -> dict:
    block = prog.program.block("f")
    env = {n: xp.asarray(v) for n, v in args.items()}
    env.update({n: xp.asarray(prog.get_var(n)) for n in prog.var_names()})
    return run_ops(block.ops, env, xp=xp, program=prog.program, block=block)


def _returned(prog, env: dict) -> list:
    from fluid_interactive.ir.records import returned_names
    return [env[n] for n in returned_names(prog.program.block("f").returns)]


def check_block(build: Callable[[], Any], feeds: Mapping[str, Any],
                wrt: Sequence[str] = (), rtol: float = 1e-6, atol: float = 1e-8,
                eps: float = 1e-6, max_elements: int = 24, seed: int = 0,
                syncs: int | None = None) -> list[np.ndarray]:
    """A program with control flow, checked as `check_op` / `check_grad` check one op.

    ``build()`` runs inside a traced method: it declares the data vars named in ``feeds``
    (float ones in float64) and returns an output var or a list of them. The compiled plan
    must agree with the reference interpreter, on the host and on the device module (where
    the only host crossings are reads of single values: ``syncs`` of them when given). With
    ``wrt`` (names of float data vars, declared with ``stop_gradient=False``), the
    gradients of sum(output * random cotangent) must agree between plan, interpreter and
    central finite differences. Returns the outputs."""
    feeds = {n: _promote(np.asarray(v)) for n, v in feeds.items()}
    forward_cls, _ = _program_class(build, list(feeds), {})
    forward = forward_cls().Compile(seed=seed)
    outs = [np.asarray(o) for o in _as_list(forward.f(**feeds))]
    reference = _returned(forward, _interpret(forward, feeds))
    for got, want in zip(outs, reference):
        np.testing.assert_allclose(got, np.asarray(want), rtol=rtol, atol=atol)
    _check_on_device(forward_cls, feeds, reference, syncs, seed)
    if wrt:
        rng = np.random.default_rng(seed)
        cot = {k: rng.standard_normal(o.shape) for k, o in enumerate(outs)
               if o.dtype.kind == "f"}
        _check_block_grads(build, feeds, wrt, cot, seed, (rtol, atol, eps, max_elements))
    return outs


def _promote(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _check_block_grads(build, feeds, wrt, cot, seed, tolerances) -> None:
    rtol, atol, eps, max_elements = tolerances
    cls, cot_names = _program_class(build, list(feeds), {"values": cot, "wrt": list(wrt)})
    prog = cls().Compile(seed=seed)
    args = dict(feeds, **dict(zip(cot_names, cot.values())))
    results = _as_list(prog.f(**args))
    n_out = len(results) - 1 - len(wrt)
    compiled = results[n_out + 1:]
    env = _interpret(prog, args)
    _check_on_device(cls, args, _returned(prog, env), None, seed)   # the gradient, too
    interpreted = _returned(prog, env)[n_out + 1:]
    loss_name = _returned_names(prog)[n_out]
    rng = np.random.default_rng(seed)
    for name, got, ref in zip(wrt, compiled, interpreted):
        assert got is not None, f"no gradient reaches {name}"
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name}: plan vs interpreter")
        x = feeds[name]
        flat = np.arange(x.size) if x.size <= max_elements else \
            rng.choice(x.size, max_elements, replace=False)
        numeric = np.empty(len(flat))
        for k, i in enumerate(flat):
            values = []
            for sign in (1, -1):
                moved = x.copy()
                moved.flat[i] += sign * eps
                values.append(float(_interpret(prog, dict(args, **{name: moved}))[loss_name]))
            numeric[k] = (values[0] - values[1]) / (2 * eps)
        np.testing.assert_allclose(np.asarray(got).reshape(-1)[flat], numeric, rtol=1e-5,
                                   atol=1e-7, err_msg=f"gradient of {name}: finite differences")


def _returned_names(prog) -> list[str]:
    from fluid_interactive.ir.records import returned_names
    return returned_names(prog.program.block("f").returns)


def _check_on_device(cls, feeds: dict, reference: list, syncs: int | None, seed: int
                     ) -> None:
    """The compiled plan on the device module (the stand-in, or CuPy): the same values, and
    no crossing between host and device but the feeds going in, the results coming out and
    single values read back (a loop's condition, an array's index): ``syncs`` of those
    when given."""
    from fluid_interactive import backend
    from fluid_interactive.ir.blocks import walk_ops

    from .device import COVERED, REAL_CUPY, _transfers, device_module
    xp = device_module()
    saved = backend._cupy_with_gpu
    if not REAL_CUPY:
        backend._cupy_with_gpu = lambda: xp
    try:
        prog = cls().Compile(seed=seed, device="gpu")
        prog.f(**feeds)   # the first call plans: kernels are prepared, constants moved
        with _transfers() as moved:
            outs = _as_list(prog.f(**feeds))
    finally:
        backend._cupy_with_gpu = saved
    block = prog.program.block("f")
    index = any(get_spec(op.type).host_access == "index"
                for _, op in walk_ops(prog.program, block))
    scalars = sum(isinstance(o, (float, int, bool)) for o in outs)
    if moved:   # CuPy itself counts nothing
        extra = {k: v for k, v in moved.items() if v and k not in ("to_device", "to_host", "sync")}
        assert not extra, f"the program crossed between host and device: {dict(moved)}"
        assert moved["to_host"] == len(outs) - scalars, dict(moved)
        assert index or moved["to_device"] == len(feeds), dict(moved)
        if syncs is not None:
            assert moved["sync"] - scalars == syncs, (dict(moved), syncs)
    for got, want in zip(outs, reference):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-8)
    COVERED.update(op.type for _, op in walk_ops(prog.program, block))
