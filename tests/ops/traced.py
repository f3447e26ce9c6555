"""The output types a shape rule gives for input types as the tracer sees them (-1 for
dims unknown until run time), without running the op."""
from __future__ import annotations

from collections.abc import Mapping

from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import infer_op
from fluid_interactive.ops.spec import TensorType

Typed = tuple[tuple[int, ...], str]


def traced_types(op_type: str, inputs: Mapping[str, Typed | list[Typed]],
                 attrs: dict | None = None, counts: Mapping[str, int] | None = None
                 ) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of every output, in slot order; ``inputs`` maps a slot to one
    (shape, dtype) or, for a duplicable slot, a list of them; ``counts`` the number of vars
    of each output slot (default: one ``Out``)."""
    env, ins = {}, {}
    for slot, value in inputs.items():
        names = []
        for i, (shape, dtype) in enumerate(value if isinstance(value, list) else [value]):
            env[f"{slot}_{i}"] = TensorType(tuple(shape), dtype)
            names.append(f"{slot}_{i}")
        ins[slot] = names
    outs = {slot: [f"out_{slot}_{i}" for i in range(n)]
            for slot, n in (counts or {"Out": 1}).items()}
    types = infer_op(OpDesc(op_type, ins, outs, dict(attrs or {})), env.__getitem__)
    return [(t.shape, t.dtype) for ts in types.values() for t in ts]
