"""`fluid.parameters()`: the parameters created so far while tracing."""
from __future__ import annotations

from .tracing import current_trace
from .variable import Variable


def parameters(scope: str | None = None) -> list[Variable]:
    """Parameter vars created so far in this compile, in creation order; with ``scope``,
    only those whose name lies under that var_scope path (e.g. ``'discriminator'``)."""
    trace = current_trace("fluid.parameters")
    prefix = None if scope is None else scope.rstrip("/") + "/"
    return [Variable(trace, v.name) for v in trace.program.global_block().vars.values()
            if v.is_parameter and (prefix is None or v.name.startswith(prefix))]
