"""Integer-list attributes that may come from tensors instead: Paddle 1.8's ``starts``,
``ends``, ``strides``, ``shape``, ``offsets`` and ``expand_times`` given as Variables.

An op takes such a list (`IntList`) three ways, as Paddle's ops do:

* the attr itself (a list of ints, known while tracing);
* slot ``whole``: one 1-D int tensor holding the whole list;
* slot ``parts``: one-element int tensors, either one per entry (Paddle's form) or one
  per entry the attr marks (``marked(attrs, i)``), in order.

With parts, the attr still holds the entries that were ints, the others marked: the shape
rule knows those while tracing and leaves the marked ones unknown (None), so the dims they
decide stay -1 until the op runs. The kernel reads the
tensors' values each call (a host read on a device: such ops declare
``host_access="reads"``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..ir.text import format_shape as _fmt
from .spec import KernelContext

Marked = Callable[[Mapping[str, Any], int], bool]


def marked_minus_one(attr: str) -> Marked:
    """Entries the attr holds as -1 come from tensors (where -1 is no value of its own)."""
    return lambda attrs, i: int(attrs[attr][i]) == -1


def marked_by_flags(flags: str) -> Marked:
    """Entries whose flag in attr ``flags`` is -1 come from tensors (Paddle's
    ``infer_flags``)."""
    return lambda attrs, i: i < len(attrs[flags]) and int(attrs[flags][i]) == -1


@dataclass(frozen=True)
class IntList:
    attr: str
    whole: str
    parts: str
    marked: Marked | None = None   # None: every entry from tensors is unknown

    def slot_specs(self) -> tuple[str, str]:
        """The optional input slots, for `spec.slots`."""
        return self.whole + "?", self.parts + "*?"

    def traced(self, ctx: Any, length: int | None = None) -> list[int | None]:
        """The entries as the shape rule sees them: ints, None where a tensor decides.
        ``length``: how many entries there must be (None: the attr's count)."""
        values = [int(v) for v in ctx.attrs[self.attr]]
        if ctx.has_input(self.whole):
            t = ctx.input(self.whole)
            n = t.shape[0] if t.rank == 1 else -1
            if t.dtype not in ("int32", "int64") or n < 0:
                ctx.fail(f"{self.attr} given as a tensor must be a 1-D int32/int64 tensor of "
                         f"known length, got {t.dtype}{_fmt(t.shape)}")
            return self._checked(ctx, [None] * n, length)
        parts = ctx.inputs(self.parts)
        if not parts:
            return self._checked(ctx, list(values), length)
        for t in parts:
            if t.dtype not in ("int32", "int64") or t.shape not in ((1,), ()):
                ctx.fail(f"each tensor entry of {self.attr} must be one int32/int64 value "
                         f"(shape [1]), got {t.dtype}{_fmt(t.shape)}")
        if self.marked is None or not values:
            return self._checked(ctx, [None] * len(parts), length)
        unknown = [i for i in range(len(values)) if self.marked(ctx.attrs, i)]
        if len(parts) not in (len(values), len(unknown)):
            ctx.fail(f"{self.attr} lists {len(values)} entries, {len(unknown)} of them from "
                     f"tensors, but {len(parts)} tensors are given")
        return self._checked(ctx, [None if i in unknown else v
                                   for i, v in enumerate(values)], length)

    def _checked(self, ctx: Any, values: list[int | None], length: int | None
                 ) -> list[int | None]:
        if length is not None and len(values) != length:
            ctx.fail(f"{self.attr} has {len(values)} entries but must have {length}")
        return values

    def given_by_tensors(self, ctx: Any) -> bool:
        return ctx.has_input(self.whole) or bool(ctx.inputs(self.parts))


def split_inputs(ctx: KernelContext, args: Sequence[Any]) -> dict[str, list[Any]]:
    """A kernel's flat arguments grouped by input slot (in the spec's slot order)."""
    groups: dict[str, list[Any]] = {}
    at = 0
    for slot in ctx.spec.inputs:
        n = len(ctx.inputs(slot.name))
        groups[slot.name] = list(args[at:at + n])
        at += n
    return groups


def read_list(arg: IntList, attrs: Mapping[str, Any], groups: Mapping[str, list[Any]]
              ) -> list[int]:
    """The list's values this call: from the tensors when given (each read as a Python
    int), else the attr."""
    whole = groups.get(arg.whole) or []
    if whole:
        flat = whole[0].reshape(-1)
        return [int(flat[i]) for i in range(flat.shape[0])]
    parts = groups.get(arg.parts) or []
    values = [int(v) for v in attrs[arg.attr]]
    if not parts:
        return values
    if len(parts) >= len(values) or arg.marked is None:
        return [int(p.reshape(-1)[0]) for p in parts]
    taken = iter(parts)   # the parts stand for the marked entries, in order
    return [int(next(taken).reshape(-1)[0]) if arg.marked(attrs, i) else v
            for i, v in enumerate(values)]
