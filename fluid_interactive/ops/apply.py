"""Running a spec's rules on an `OpDesc`: shape inference and kernel preparation.

Both the tracing builder (types with -1 batch dims) and the planner (concrete types) go
through `infer_op`; the planner and the reference interpreter through `prepare_kernel`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ShapeError
from ..ir.records import OpDesc
from .registry import get_spec
from .spec import Forward, InferContext, KernelContext, OpSpec, TensorType

TypeOf = Callable[[str], TensorType]


def input_types(spec: OpSpec, op: OpDesc, type_of: TypeOf) -> dict[str, list[TensorType]]:
    return {slot: [type_of(n) for n in names] for slot, names in op.inputs.items()}


def infer_op(op: OpDesc, type_of: TypeOf) -> dict[str, list[TensorType]]:
    """Output types of ``op`` by slot; raises `ShapeError` from the spec's rule."""
    spec = get_spec(op.type)
    attrs = spec.full_attrs(op.attrs)
    counts = {slot: len(names) for slot, names in op.outputs.items()}
    ctx = InferContext(spec, input_types(spec, op, type_of), attrs, counts)
    spec.infer(ctx)
    for slot, n in counts.items():
        got = ctx.outputs.get(slot, [])
        if len(got) != n:
            raise ShapeError(f"shape rule of {op.type!r} produced {len(got)} type(s) for output "
                             f"slot {slot!r}, which has {n} var(s)")
    return ctx.outputs


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
