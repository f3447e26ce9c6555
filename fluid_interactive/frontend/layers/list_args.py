"""Integer lists a layer takes as ints, as a Variable, or as a list mixing both (Paddle
1.8's ``starts``, ``shape``, ``expand_times``...): how each form reaches the op (see
`ops/int_args.py`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import append_simple, as_variable


@dataclass
class ListArg:
    """One list as the op takes it: ``values`` for the attr (-1 where a Variable stands),
    ``whole`` (a Variable holding the list) or ``parts`` (Variables standing for entries),
    and ``from_tensor[i]``: whether entry i comes from a Variable."""
    values: list[int]
    whole: Variable | None = None
    parts: list[Variable] = field(default_factory=list)
    from_tensor: list[bool] = field(default_factory=list)

    def inputs(self, whole_slot: str, parts_slot: str) -> dict[str, Any]:
        """The op's input slots for this list (none when it is all ints)."""
        if self.whole is not None:
            return {whole_slot: self.whole}
        return {parts_slot: self.parts} if self.parts else {}

    @property
    def given_by_tensors(self) -> bool:
        return self.whole is not None or bool(self.parts)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def list_arg(value: Any, what: str, layer: str, every_entry: bool = False) -> ListArg:
    """``value`` (a list/tuple of ints and Variables, or one Variable) as a `ListArg`.
    With ``every_entry`` a list holding a Variable becomes one tensor per entry (the ints
    made [1] int32 constants), for ops where the attr has no value free to mark an entry."""
    if isinstance(value, Variable):
        return ListArg([], whole=_int_tensor(value, what, layer))
    if not isinstance(value, (list, tuple)) or not all(
            _is_int(v) or isinstance(v, Variable) for v in value):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a list of ints (entries may "
                                        f"be int Variables of shape [1]) or an int Variable, "
                                        f"got {value!r:.60}")
    flags = [isinstance(v, Variable) for v in value]
    values = [-1 if f else int(v) for v, f in zip(value, flags)]
    if not any(flags):
        return ListArg(values, from_tensor=flags)
    parts = [_int_tensor(v, f"{what}[{i}]", layer) if f else
             (_constant(int(v)) if every_entry else None)
             for i, (v, f) in enumerate(zip(value, flags))]
    return ListArg(values, parts=[p for p in parts if p is not None], from_tensor=flags)


def _int_tensor(value: Any, what: str, layer: str) -> Variable:
    v = as_variable(value, f"{layer}: {what}")
    if v.dtype not in ("int32", "int64"):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int32 or int64 Variable, "
                                        f"got {v.dtype}")
    v.stop_gradient = True
    return v


def _constant(value: int) -> Variable:
    out = append_simple("fill_constant", {}, {"shape": [1], "dtype": "int32", "value": value})
    out.stop_gradient = True
    return out
