"""The compiled form of an elementwise chain: one loop nest over the output that reads
each element once, applies every member's scalar function in turn, and writes the result
once.

A member's scalar function (`OpSpec.scalar`, next to the op's kernel) is a plain Python
function of one element, ``fn(x, [y,] *constants)``, that ruff and mypy check like any
other: it may name NumPy as ``np``, Python's ``abs``, ``min`` and ``max``, and its own
arguments, nothing else. The tier compiles a module made of the members' sources (each
renamed ``m0``, ``m1``, ...) and the loop nest that calls them, which is the one part
written per chain (its rank and its side inputs' broadcasting)::

    def chain(x, y0, out):
        for i0 in range(out.shape[0]):
            for i1 in range(out.shape[1]):
                h = x[i0, i1]
                h = m0(h, y0[0, i1])  # elementwise_add
                h = m1(h, C0)  # relu
                out[i0, i1] = h

Members are compiled to be inlined into the loop, so the loop vectorises as one
expression would.
"""
from __future__ import annotations

import dis
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from .build import NJIT_OPTIONS, KernelSource, function_source

#: the NumPy functions a member may call for the compiled chain to give the NumPy kernels'
#: values bit for bit (correctly rounded, or not rounded at all); any other (exp, tanh,
#: log1p, ...) is NumPy's SIMD code on one side and LLVM's on the other, the same within
#: float rounding only
EXACT_CALLS = frozenset({"sqrt", "abs", "fabs", "sign", "copysign", "maximum", "minimum",
                         "floor", "ceil", "trunc"})
#: the builtins a member may call (compiled as the float functions of the same name)
_BUILTINS = frozenset({"abs", "min", "max"})
#: Python's ``//`` and ``**`` of floats round their own way, not as NumPy's ufuncs
_INEXACT_OPERATORS = frozenset({"//", "**", "//=", "**="})


@dataclass(frozen=True)
class Member:
    """One op of a chain: ``fn(h, [y,] *constants)`` gives its result from its
    predecessor's ``h`` (and its side input's element ``y`` when ``side``); the constants
    are numbers the chain's module holds in the arrays' dtype."""
    op_type: str
    fn: Callable[..., Any]
    constants: tuple[float, ...] = ()
    side: bool = False


def check_scalar(fn: Callable[..., Any]) -> None:
    """Raise when ``fn`` cannot be compiled from its source alone: not a module-level
    function, or naming anything but ``np``, `_BUILTINS` and its arguments."""
    if not inspect.isfunction(fn) or fn.__qualname__ != fn.__name__ or \
            fn.__name__ == "<lambda>":
        raise TypeError(f"a chain member's scalar form must be a module-level function, "
                        f"not {fn!r}")
    names = inspect.getclosurevars(fn)
    extra = [*names.nonlocals, *(set(names.globals) - {"np"}),
             *(set(names.builtins) - _BUILTINS)]
    if extra:
        raise TypeError(f"{fn.__module__}.{fn.__name__} names {sorted(extra)}: a chain "
                        f"member's scalar form may name only np, abs, min, max and its "
                        f"arguments (its module's other names are not compiled with it)")


@cache
def exact(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` compiled gives NumPy's values bit for bit: arithmetic, comparisons,
    ``abs`` and `EXACT_CALLS`."""
    names = inspect.getclosurevars(fn)
    if set(names.builtins) - {"abs"} or set(names.unbound) - EXACT_CALLS:
        return False
    return not any(i.argrepr in _INEXACT_OPERATORS for i in dis.get_instructions(fn))


@cache
def _renamed(fn: Callable[..., Any], name: str) -> str:
    """``fn``'s source with its ``def`` line naming it ``name``."""
    check_scalar(fn)
    lines = function_source(fn).rstrip().splitlines()
    head = f"def {fn.__name__}("
    at = next(i for i, line in enumerate(lines) if line.startswith(head))
    lines[at] = f"def {name}(" + lines[at][len(head):]
    return "\n".join(lines[at:])


def _loop_nest(members: Sequence[Member], names: Sequence[str], rank: int,
               side_shapes: Sequence[tuple[int, ...]], first_constant: Sequence[int]
               ) -> list[str]:
    loops = [f"i{d}" for d in range(rank)]
    body = ["def chain(x, " + "".join(f"y{k}, " for k in range(len(side_shapes))) + "out):"]
    for d, var in enumerate(loops):
        body.append("    " * (d + 1) + f"for {var} in range(out.shape[{d}]):")
    pad = "    " * (rank + 1)
    body.append(f"{pad}h = x[{', '.join(loops)}]")
    side = iter(range(len(side_shapes)))
    for member, name, c0 in zip(members, names, first_constant):
        args = ["h"]
        if member.side:
            k = next(side)
            index = ", ".join("0" if n == 1 else loops[d]
                              for d, n in enumerate(side_shapes[k]))
            args.append(f"y{k}[{index}]")
        args += [f"C{c0 + j}" for j in range(len(member.constants))]
        body.append(f"{pad}h = {name}({', '.join(args)})")
    body.append(f"{pad}out[{', '.join(loops)}] = h")
    return body


def chain_source(members: Sequence[Member], rank: int,
                 side_shapes: Sequence[tuple[int, ...]], dtype: str) -> KernelSource:
    """The chain's module: ``side_shapes`` gives each side input's shape aligned to the
    output's rank (1 where it broadcasts), in the order the members read them; the arrays
    are of ``dtype``. Kept for the plans of other sizes, which ask again."""
    return _chain_source(tuple(members), rank, tuple(map(tuple, side_shapes)), dtype)


@lru_cache(maxsize=256)
def _chain_source(members: tuple[Member, ...], rank: int,
                  side_shapes: tuple[tuple[int, ...], ...], dtype: str) -> KernelSource:
    fns = list(dict.fromkeys(m.fn for m in members))    # each function once
    name_of = {fn: f"m{k}" for k, fn in enumerate(fns)}
    names = [name_of[m.fn] for m in members]
    first_constant: list[int] = []
    constants: list[float] = []
    for m in members:
        first_constant.append(len(constants))
        constants += m.constants
    consts = [f"C{i} = np.{dtype}(float.fromhex({float(v).hex()!r}))"
              for i, v in enumerate(constants)]
    inline = NJIT_OPTIONS + ", inline='always'"
    parts = ["import numpy as np", "from numba import njit", "\n".join(consts)]
    parts += [f"@njit({inline})\n" + _renamed(fn, name_of[fn]) for fn in fns]
    parts.append(f"@njit({NJIT_OPTIONS})\n" + "\n".join(
        _loop_nest(members, names, rank, side_shapes, first_constant)))
    # op types are registered names (ops/registry.py), safe in a comment
    legend = "\n".join(f"# {name}: {m.op_type}" for name, m in zip(names, members))
    text = legend + "\n" + "\n\n\n".join(p for p in parts if p) + "\n"
    args = (("array", dtype, rank),) * (1 + len(side_shapes) + 1)
    return KernelSource("chain", text, "chain", args)
