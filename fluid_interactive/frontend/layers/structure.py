"""Nested structures of vars (a var, or tuples, named tuples, lists and dicts of them),
flattened and rebuilt: what `cond`'s branches, a loop's functions and an `RNNCell` return."""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import as_variable

# None for a var; ('tuple'|'list'|a named tuple's class, [children]); ('dict', [(key, child)])
Structure = Any


def _kind(value: list | tuple) -> Any:
    if isinstance(value, list):
        return "list"
    return type(value) if hasattr(value, "_fields") else "tuple"


def flatten(value: Any, what: str) -> tuple[Structure, list[Variable]]:
    """The shape of ``value`` (comparable with ``==``) and its vars in order."""
    if isinstance(value, (list, tuple)):
        kind = _kind(value)
        parts = [flatten(v, what) for v in value]
        return (kind, [p[0] for p in parts]), [v for p in parts for v in p[1]]
    if isinstance(value, dict):
        keys = sorted(value)
        parts = [flatten(value[k], what) for k in keys]
        return ("dict", [(k, p[0]) for k, p in zip(keys, parts)]), \
            [v for p in parts for v in p[1]]
    if isinstance(value, Variable):
        return None, [as_variable(value, what)]
    raise error_at(OpArgumentError, f"{what} must be a Variable or a tuple, list or dict of "
                                    f"them, got {type(value).__name__}")


def pack(structure: Structure, values: list[Variable]) -> Any:
    """``values`` in the shape ``structure`` describes."""
    it = iter(values)

    def build(s: Structure) -> Any:
        if s is None:
            return next(it)
        kind, children = s
        if kind == "dict":
            return {k: build(c) for k, c in children}
        items = [build(c) for c in children]
        if kind == "list":
            return items
        return tuple(items) if kind == "tuple" else kind(*items)
    return build(structure)
