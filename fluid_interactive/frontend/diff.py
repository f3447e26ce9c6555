"""`fluid.diff(a, b)`: what differs between two programs."""
from __future__ import annotations

from typing import Any

from ..ir.diff import ProgramDiff
from ..runtime.diff import Side, diff_sides, side_of
from .program import Program, trace_program


def _side(obj: Any) -> Side:
    if isinstance(obj, type) and issubclass(obj, Program):
        obj = obj()
    if isinstance(obj, Program):
        return trace_program(obj), None, type(obj).__name__
    return side_of(obj)


def diff(a: Any, b: Any) -> ProgramDiff:
    """What changes from ``a`` to ``b``: per method, the ops added, removed and changed
    (type, attrs, inputs, shapes), and per persistable var whether it would be kept,
    added, dropped or reinitialised by a recompilation from ``a`` to ``b``.

    ``a`` and ``b`` are `fluid.Program` classes or instances (traced, not compiled),
    compiled programs, `ProgramDesc`s or checkpoint directories, in any mix. Where both
    hold values (compiled programs, checkpoints) kept state also says whether its values
    differ. ``str(result)`` is the text form; in a notebook it displays with a drawing."""
    return diff_sides(_side(a), _side(b))
