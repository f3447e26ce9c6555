"""The generated entry point of a compiled method: the code that runs on every call before
the block's plan does.

It is generated per method, with one positional parameter per data var, so a call with
NumPy arrays of the declared dtype costs a type check per argument, one dict lookup for
the plan of these shapes, and the plan itself. Anything else (keywords, lists, scalars,
single samples, other dtypes) takes the general path through the feed converters.
"""
from __future__ import annotations

import linecache
from itertools import count
from typing import Any, Callable

import numpy as np

from ..errors import FluidError


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
_counter = count()


def _fast_check(i: int, shape: tuple[int, ...]) -> str:
    """A condition that is False exactly when argument i needs no conversion."""
    if not shape or shape[0] >= 0 or any(d < 0 for d in shape[1:]):
        return "True"
    return (f"type(a{i}) is not ndarray or a{i}.dtype is not d{i} or "
            f"a{i}.shape[1:] != t{i} or a{i}.ndim != {len(shape)}")


def make_entry(n_feeds: int, feed_shapes: list[tuple[int, ...]], dtypes: list[np.dtype],
               converters: list[Callable], bind: Callable, plans: dict, plan: Callable,
               values: dict, kernel_error: Callable, to_device: Callable | None,
               reads: list[tuple[str, int]] = ()) -> Callable:
    """``__call__(self, a0, a1, ...)`` for a method with ``n_feeds`` data vars, which also
    takes the next batch of each reader in ``reads`` ((reader var, slot count) pairs)."""
    params = "".join(f", a{i}=MISSING" for i in range(n_feeds))
    args = ", ".join(f"a{i}" for i in range(n_feeds))
    missing = " or ".join(f"a{i} is MISSING" for i in range(n_feeds))
    lines = [f"def __call__(self{params}, *more, **extra):",
             f"    if more or extra{' or ' + missing if missing else ''}:",
             f"        return self({'*' if n_feeds else ''}bind(({args}{',' if n_feeds == 1 else ''}) "
             f"+ more, extra))" if n_feeds else "        return self(*bind(more, extra))"]
    for i, shape in enumerate(feed_shapes):
        lines.append(f"    if {_fast_check(i, shape)}:")
        lines.append(f"        a{i} = c{i}(a{i})")
        if to_device is not None:
            lines.append(f"    a{i} = to_device(a{i})")
    total = n_feeds
    for reader, slots in reads:
        names = [f"a{total + k}" for k in range(slots)]
        total += slots
        # An EOFException here ends the call before anything ran.
        lines.append(f"    {', '.join(names)}, = S[{reader!r}].next()")
        if to_device is not None:
            lines += [f"    {n} = to_device({n})" for n in names]
    every = ", ".join(f"a{i}" for i in range(total))
    key = "(" + "".join(f"a{i}.shape, " for i in range(total)) + ")"
    lines += [f"    code = plans_get({key})",
              "    if code is None:",
              f"        code = plan([{every}])",
              "    try:",
              f"        return code.fn(S{', ' if total else ''}{every})",
              "    except FluidError:",
              "        raise",
              "    except Exception as e:",
              "        raise kernel_error(e, code) from e"]
    namespace: dict[str, Any] = {
        "MISSING": MISSING, "ndarray": np.ndarray, "bind": bind, "plans_get": plans.get,
        "plan": plan, "S": values, "kernel_error": kernel_error, "FluidError": FluidError,
        "to_device": to_device,
    }
    for i, (dtype, shape, conv) in enumerate(zip(dtypes, feed_shapes, converters)):
        namespace[f"d{i}"], namespace[f"t{i}"], namespace[f"c{i}"] = dtype, tuple(shape[1:]), conv
    source = "\n".join(lines) + "\n"
    filename = f"<fluid:entry:{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace["__call__"]
