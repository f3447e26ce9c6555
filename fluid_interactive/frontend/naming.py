"""Unique names and `var_scope`.

Each `Compile()` starts one root generator, so names depend only on the class. Entering
``var_scope(name)`` installs a *fresh* generator whose names carry the scope path as a
prefix, and leaving restores the previous one (also when the body raises). Layers built
the same way under the same scope therefore get the same parameter names, in every method
and on every call: that is how methods share weights.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import OpArgumentError
from ..ir.names import UniqueNameGenerator
from .tracing import check_name, current_trace, error_at  # the trace owns the generator


@contextmanager
def var_scope(name: str) -> Iterator[str]:
    """Prefix the names of layers created inside with ``name/`` and restart their counters.

    >>> with fluid.var_scope('prediction'):
    ...     y = fluid.layers.fc(input=x, size=1)     # params prediction/fc_0.w_0, .b_0
    """
    trace = current_trace("fluid.var_scope")
    if not isinstance(name, str) or not name or "/" in name:
        raise error_at(OpArgumentError, f"var_scope name must be a non-empty string without "
                                        f"'/', got {name!r}; nest var_scopes for a path")
    check_name(name, "var_scope name")
    previous = trace.names
    trace.names = UniqueNameGenerator(previous.prefix + name + "/")
    try:
        yield trace.names.prefix
    finally:
        trace.names = previous
