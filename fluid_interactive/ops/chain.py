"""``fused_elementwise``: a chain of elementwise ops run as one op (made by the plan pass
`passes.fuse.fuse_elementwise_chains`; values bit-identical to the chain's).

Attr ``ops`` lists the members in order, each ``[type, attrs, side]``: the op's type, its
attrs, and whether it reads a side input (its ``Y``, the next var of ``Ys``). The first
member reads ``X``; each later one reads its predecessor's result, which no other op
reads. Each member's own kernel runs with the fused op's output buffer as its output, so
the chain runs in place in one array: one kernel call for the runtime, no temporaries.
"""
from __future__ import annotations

from ..ir.records import OpDesc
from .apply import infer_op, prepare_kernel
from .registry import get_spec, register
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots


def member_ops(attrs: dict, x: str, ys: list[str], out: str) -> list[OpDesc]:
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
    return run


register(OpSpec("fused_elementwise", slots("X", "Ys*"), slots("Out"), _infer, _kernel,
                attrs={"ops": []}, inplace=(("Out", "X"),),
                doc="A chain of elementwise ops run in place in one array (made by the "
                    "chain-fusion pass; values bit-identical)."))


def chainable(op_type: str) -> bool:
    """An op the chain pass may take: elementwise (its Out may be written into X's array),
    one output Out, inputs X and at most one side input Y."""
    spec = get_spec(op_type)
    ins = [s.name for s in spec.inputs]
    return (("Out", "X") in spec.inplace and [s.name for s in spec.outputs] == ["Out"]
            and ins in (["X"], ["X", "Y"]) and not spec.random and not spec.aliases)
