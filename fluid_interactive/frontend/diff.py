"""`fluid.diff(a, b)`: what differs between two programs."""
from __future__ import annotations

from typing import Any

from ..ir.diff import ProgramDiff, check_detail
from ..runtime.diff import Side, diff_sides, side_of
from .program import Program, trace_program


def _side(obj: Any) -> Side:
    if isinstance(obj, type) and issubclass(obj, Program):
        obj = obj()
    if isinstance(obj, Program):
        return trace_program(obj), None, type(obj).__name__
    return side_of(obj)


def diff(a: Any, b: Any, detail: str = "layers") -> ProgramDiff:
    """What changes from ``a`` to ``b``: one line per changed layer, or every op with
    ``detail='ops'``.

    By layer (``detail='layers'``, the default): one line per layer that changed, such as
    ``mlp/fc_0 (fc): size 64 → 48; re-initialised w_0, b_0 with their adam state``, then
    the methods, the optimizer and other state that changed. By op (``detail='ops'``):
    per method the ops added, removed and changed (type, attrs, inputs, shapes), and per
    persistable var whether a recompilation from ``a`` to ``b`` would keep, add, drop or
    reinitialise it. ``result.text(detail='ops')`` gives the op level of any diff.

    ``a`` and ``b`` are `fluid.Program` classes or instances (traced, not compiled),
    compiled programs (or one of their methods), `ProgramDesc`s or checkpoint
    directories, in any mix. Where both hold values (compiled programs, checkpoints) kept
    state also says whether its values differ. ``str(result)`` is the text; in a notebook
    it displays with a drawing (by layer; each changed layer opens op by op)."""
    check_detail(detail)
    return diff_sides(_side(a), _side(b), detail)
