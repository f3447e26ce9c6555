"""The op registry: a plain dict from op type to its spec."""
from __future__ import annotations

import difflib

from ..errors import OpArgumentError
from .spec import OpSpec

_REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.type in _REGISTRY:
        raise ValueError(f"op {spec.type!r} is registered twice")
    _REGISTRY[spec.type] = spec
    return spec


def get_spec(op_type: str) -> OpSpec:
    spec = _REGISTRY.get(op_type)
    if spec is None:
        close = difflib.get_close_matches(op_type, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise OpArgumentError(f"op {op_type!r} is not registered{hint} "
                              f"(known ops: {', '.join(sorted(_REGISTRY))})")
    return spec


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)
