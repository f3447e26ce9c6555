"""``fused_elementwise``: a chain of elementwise ops run as one op (made by the plan pass
`passes.fuse.fuse_elementwise_chains`; values bit-identical to the chain's).

Attr ``ops`` lists the members in order, each ``[type, attrs, side]``: the op's type, its
attrs, and whether it reads a side input (its ``Y``, the next var of ``Ys``). The first
member reads ``X``; each later one reads its predecessor's result, which no other op
reads. Each member's own kernel runs with the fused op's output buffer as its output, so
the chain runs in place in one array: one kernel call for the runtime, no temporaries.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from math import prod
from typing import Any

from ..ir.records import OpDesc
from ..kernels.chain import Member, chain_source, exact
from .apply import infer_op, prepare_kernel
from .broadcast import aligned_y_shape
from .compiled import compiled_kernel, run_compiled
from .registry import get_spec, register
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots


def member_ops(attrs: Mapping[str, Any], x: str, ys: list[str], out: str) -> list[OpDesc]:
    """The members as ops over names: ``x`` in, ``out`` out, ``<out>#k`` in between."""
    ops, current, side = [], x, iter(ys)
    members = attrs["ops"]
    for k, (op_type, op_attrs, has_side) in enumerate(members):
        result = out if k == len(members) - 1 else f"{out}#{k}"
        inputs = {"X": [current]}
        if has_side:
            inputs["Y"] = [next(side)]
        ops.append(OpDesc(op_type, inputs, {"Out": [result]}, dict(op_attrs)))
        current = result
    return ops


def _infer(ctx: InferContext) -> None:
    ys = ctx.inputs("Ys")
    types = {"X": ctx.input("X"), **{f"Y{i}": t for i, t in enumerate(ys)}}
    ops = member_ops(ctx.attrs, "X", [f"Y{i}" for i in range(len(ys))], "Out")
    for op in ops:
        try:
            out = infer_op(op, types.__getitem__)
        except Exception as e:   # the member's own message, named
            ctx.fail(f"member {op.type} of the chain: {e}")
        types[op.outputs["Out"][0]] = out["Out"][0]
    ctx.set_output("Out", types["Out"].shape, types["Out"].dtype)


def _kernel(ctx: KernelContext):
    ys = ctx.inputs("Ys")
    out_type = ctx.output("Out")
    types: dict[str, TensorType] = {"X": ctx.input("X"),
                                    **{f"Y{i}": t for i, t in enumerate(ys)}}
    ops = member_ops(ctx.attrs, "X", [f"Y{i}" for i in range(len(ys))], "Out")
    for op in ops:
        types[op.outputs["Out"][0]] = infer_op(op, types.__getitem__)["Out"][0]
        if types[op.outputs["Out"][0]] != out_type:
            raise ValueError(f"fused_elementwise: member {op.type} gives "
                             f"{types[op.outputs['Out'][0]]}, not the chain's {out_type}")
    buf = ctx.buffer("Out")
    steps = []
    for op in ops:
        fn = prepare_kernel(op, types.__getitem__, ctx.xp, {"Out": [buf]})
        steps.append((fn, "Y" in op.inputs))

    def run(x, *side):
        it = iter(side)
        h = x
        for fn, has_side in steps:
            h = fn(h, next(it)) if has_side else fn(h)
        return h
    return _compiled(ctx, ops, types, buf, run) or run


#: Chains whose output has fewer elements run NumPy only: a compiled call's fixed cost
#: (checking every argument's type) is then more than the ufunc calls it saves.
COMPILE_MIN_ELEMENTS = 4096

def _compiled(ctx: KernelContext, ops: list[OpDesc], types: dict[str, TensorType], buf: Any,
              run: Callable) -> Callable | None:
    """The chain's kernel through its compiled form (`kernels/chain.py`), or None where the
    tier does not apply: a device, a dtype other than float32/64, a side input of another
    dtype (NumPy would compute in the wider type), a member without a scalar form."""
    out = ctx.output("Out")
    if not out.shape or prod(out.shape) < COMPILE_MIN_ELEMENTS:
        return None
    members, aligned = [], []
    for op in ops:
        spec = get_spec(op.type)
        form = spec.scalar(spec.full_attrs(op.attrs)) if spec.scalar else None
        if form is None:
            return None
        if "Y" in op.inputs:
            y = types[op.inputs["Y"][0]]
            if y.dtype != out.dtype:
                return None
            al = aligned_y_shape(out.shape, y.shape, spec.full_attrs(op.attrs).get("axis", -1))
            al = al or y.shape
            aligned.append((1,) * (len(out.shape) - len(al)) + tuple(al))
        members.append(Member(op.type, form.fn, tuple(map(float, form.constants)),
                              "Y" in op.inputs))
    compiled = compiled_kernel(ctx, out.dtype, lambda: chain_source(
        members, len(out.shape), aligned, out.dtype),
        exact=all(exact(m.fn) for m in members))
    if compiled is None:
        return None
    xp = ctx.xp

    def fn(x, *side):
        target = [buf]

        def args():
            if target[0] is None:
                target[0] = xp.empty(out.shape, out.dtype)
            return (x, *(y.reshape(a) for y, a in zip(side, aligned)), target[0])
        return target[0] if run_compiled(compiled, args) else run(x, *side)
    return fn



register(OpSpec("fused_elementwise", slots("X", "Ys*"), slots("Out"), _infer, _kernel,
                attrs={"ops": []}, inplace=(("Out", "X"),),
                doc="A chain of elementwise ops run in place in one array (made by the "
                    "chain-fusion pass; values bit-identical)."))


def chainable(op: OpDesc) -> bool:
    """An op the chain pass may take: elementwise (its Out may be written into X's array),
    one output Out, inputs X and at most one side input Y (an op whose spec has optional
    inputs besides, such as scale's ScaleTensor, only while it leaves them out)."""
    spec = get_spec(op.type)
    required = [s.name for s in spec.inputs if not s.optional]
    given = {slot for slot, names in op.inputs.items() if names}
    return (("Out", "X") in spec.inplace and [s.name for s in spec.outputs] == ["Out"]
            and required in (["X"], ["X", "Y"]) and given <= {"X", "Y"}
            and not spec.random and not spec.aliases)
