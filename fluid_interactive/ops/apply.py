"""Running a spec's rules on an `OpDesc`: shape inference and kernel preparation.

Both the tracing builder (types with -1 batch dims) and the planner (concrete types) go
through `infer_op`; the planner and the reference interpreter through `prepare_kernel`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ShapeError
from ..ir.blocks import SUB_BLOCK, sub_block_index
from ..ir.records import OpDesc, ProgramDesc
from .registry import get_spec
from .spec import Forward, InferContext, KernelContext, OpSpec, SubBlockTyper, TensorType, var_type

TypeOf = Callable[[str], TensorType]


def input_types(spec: OpSpec, op: OpDesc, type_of: TypeOf) -> dict[str, list[TensorType]]:
    return {slot: [type_of(n) for n in names] for slot, names in op.inputs.items()}


def infer_op(op: OpDesc, type_of: TypeOf, sub_block: SubBlockTyper | None = None
             ) -> dict[str, list[TensorType]]:
    """Output types of ``op`` by slot; raises `ShapeError` from the spec's rule. An op
    owning a sub-block needs ``sub_block``, which types one run of it."""
    spec = get_spec(op.type)
    attrs = spec.full_attrs(op.attrs)
    counts = {slot: len(names) for slot, names in op.outputs.items()}
    ctx = InferContext(spec, input_types(spec, op, type_of), attrs, counts, op, sub_block)
    spec.infer(ctx)
    for slot, n in counts.items():
        got = ctx.outputs.get(slot, [])
        if len(got) != n:
            raise ShapeError(f"shape rule of {op.type!r} produced {len(got)} type(s) for output "
                             f"slot {slot!r}, which has {n} var(s)")
    return ctx.outputs


def declared_typer(program: ProgramDesc) -> SubBlockTyper:
    """Types of a sub-block's vars as declared (-1 for dims unknown while tracing): how
    tracing, the verifier and the backward pass type an op owning a sub-block. A plan
    types it with concrete shapes instead (`runtime.plan.analysis`)."""
    def typer(op: OpDesc, feeds: dict[str, TensorType]) -> TypeOf:
        idx = sub_block_index(op)
        if idx is None:
            raise ShapeError(f"op {op.type!r} has no {SUB_BLOCK!r} attr naming its block")
        block = program.blocks[idx]

        def type_of(name: str) -> TensorType:
            if name in feeds:
                return feeds[name]
            v = program.find_var(block, name)
            if v is None:
                raise ShapeError(f"{op.type}: block {idx} has no var {name!r}")
            return var_type(v)
        return type_of
    return typer


def prepare_kernel(op: OpDesc, type_of: TypeOf, xp: Any,
                   buffers: Mapping[str, list[Any]] | None = None, rng: Any = None,
                   is_test: bool = False, constants: Mapping[str, Any] | None = None,
                   plan_state: dict | None = None) -> Callable | Forward:
    """The kernel of ``op`` specialised for the concrete types ``type_of`` gives (or a
    `Forward` when its output is one of its inputs).
    ``constants`` (var name -> value) tells the kernel which inputs are plan-time constants,
    so it may specialise on their values; ``plan_state`` is the dict behind
    `KernelContext.shared`, one per plan."""
    spec = get_spec(op.type)
    attrs = spec.full_attrs(op.attrs)
    in_slots = input_types(spec, op, type_of)
    out_slots = {slot: [type_of(n) for n in names] for slot, names in op.outputs.items()}
    known = {}
    if constants:
        known = {slot: [constants.get(n) for n in names] for slot, names in op.inputs.items()}
    ctx = KernelContext(spec, attrs, xp, in_slots, out_slots, buffers or {}, rng, is_test,
                        known, op.inputs, plan_state)
    factory = spec.cupy_kernel if (spec.cupy_kernel is not None and
                                   xp.__name__ == "cupy") else spec.kernel
    if factory is None:
        raise ShapeError(f"op {op.type!r} has no kernel and cannot run")
    return factory(ctx)


def flat_inputs(spec: OpSpec, op: OpDesc) -> list[str]:
    """Input var names in the order kernels receive them."""
    return [n for s in spec.inputs for n in op.inputs.get(s.name, ())]


def flat_outputs(spec: OpSpec, op: OpDesc) -> list[str]:
    return [n for s in spec.outputs for n in op.outputs.get(s.name, ())]
