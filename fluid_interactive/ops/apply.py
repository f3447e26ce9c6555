"""Running a spec's rules on an `OpDesc`: shape inference and kernel preparation.

Both the tracing builder (types with -1 batch dims) and the planner (concrete types) go
through `infer_op`; the planner and the reference interpreter through `prepare_kernel`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ShapeError
from ..ir.blocks import SUB_BLOCK, sub_block_index
from ..ir.records import SELECTED_ROWS, OpDesc, ProgramDesc
from ..util.selected_rows import SelectedRows
from .plan_state import PlanState
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
    if _maps_rows(spec, ctx.inputs("X")) and ctx.has_output("Out"):
        out = ctx.outputs["Out"][0]
        ctx.outputs["Out"] = [TensorType(out.shape, out.dtype, SELECTED_ROWS)]
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
                   state: PlanState | None = None) -> Callable | Forward:
    """The kernel of ``op`` specialised for the concrete types ``type_of`` gives (or a
    `Forward` when its output is one of its inputs).
    ``constants`` (var name -> value) tells the kernel which inputs are plan-time constants,
    so it may specialise on their values; ``state`` is what the kernels of one plan share
    (`PlanState`)."""
    spec = get_spec(op.type)
    attrs = spec.full_attrs(op.attrs)
    in_slots = input_types(spec, op, type_of)
    out_slots = {slot: [type_of(n) for n in names] for slot, names in op.outputs.items()}
    known = {}
    if constants:
        known = {slot: [constants.get(n) for n in names] for slot, names in op.inputs.items()}
    ctx = KernelContext(spec, attrs, xp, in_slots, out_slots, buffers or {}, rng, is_test,
                        known, op.inputs, state)
    factory = spec.cupy_kernel if (spec.cupy_kernel is not None and
                                   xp.__name__ == "cupy") else spec.kernel
    if factory is None:
        raise ShapeError(f"op {op.type!r} has no kernel and cannot run")
    kernel = factory(ctx)
    if _maps_rows(spec, in_slots.get("X", [])):
        return _mapping_rows(kernel, xp)
    return _densifying(spec, in_slots, kernel, xp)


def _maps_rows(spec: OpSpec, xs: Sequence[TensorType]) -> bool:
    """Whether the op maps the rows of a rows-only X (`OpSpec.rows_values`)."""
    return spec.rows_values and bool(xs) and xs[0].kind == SELECTED_ROWS


def _mapping_rows(kernel: Callable | Forward, xp: Any) -> Callable:
    """``kernel`` applied to the merged rows of X (its first input), as rows of Out."""
    run: Callable = kernel if not isinstance(kernel, Forward) else (
        lambda *args: args[kernel.input_index])

    def on_rows(x: SelectedRows, *rest: Any) -> SelectedRows:
        rows = x.merged(xp)
        return SelectedRows(rows.rows, run(rows.values, *rest), rows.height)
    return on_rows


def _densifying(spec: OpSpec, in_slots: Mapping[str, list[TensorType]],
                kernel: Callable | Forward, xp: Any) -> Callable | Forward:
    """``kernel``, handed the rows-only values of the slots its spec does not take as
    they are (`OpSpec.sparse_inputs`) as dense tensors."""
    flat = [(s.name, t) for s in spec.inputs for t in in_slots.get(s.name, ())]
    dense = [i for i, (slot, t) in enumerate(flat)
             if t.kind == SELECTED_ROWS and slot not in spec.sparse_inputs]
    if not dense:
        return kernel
    run: Callable = kernel if not isinstance(kernel, Forward) else (
        lambda *args: args[kernel.input_index])

    def with_dense_inputs(*args: Any) -> Any:
        given = list(args)
        for i in dense:
            given[i] = given[i].to_dense(xp)
        return run(*given)
    return with_dense_inputs


def flat_inputs(spec: OpSpec, op: OpDesc) -> list[str]:
    """Input var names in the order kernels receive them."""
    return [n for s in spec.inputs for n in op.inputs.get(s.name, ())]


def flat_outputs(spec: OpSpec, op: OpDesc) -> list[str]:
    return [n for s in spec.outputs for n in op.outputs.get(s.name, ())]
