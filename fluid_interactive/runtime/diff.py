"""`fluid.diff` for compiled programs and checkpoints: the program difference of
`ir.diff`, plus, where both sides hold values, how the values of the state they share
differ."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..backend import to_host
from ..ir.diff import ProgramDiff, diff_programs
from ..ir.records import ProgramDesc
from .live.checkpoint import Checkpoint, read
from .live.compiled import CompiledMethod, CompiledProgram
from .live.recompile import same_value

Side = tuple[ProgramDesc, Mapping[str, Any] | None, str]


def side_of(obj: Any) -> Side:
    """(program, values or None, label) of a ProgramDesc, a compiled program or method, a
    checkpoint directory or a read `Checkpoint`."""
    if isinstance(obj, CompiledMethod):
        obj = obj.owner
    if isinstance(obj, CompiledProgram):
        return obj.program, obj.scope.snapshot(), obj.program.name or "compiled program"
    if isinstance(obj, ProgramDesc):
        return obj, None, obj.name or "program"
    if isinstance(obj, Checkpoint):
        return obj.program, obj.values, obj.program.name or "checkpoint"
    if isinstance(obj, (str, os.PathLike)):
        saved = read(obj)
        return saved.program, saved.values, os.path.basename(os.path.normpath(obj))
    raise TypeError(f"fluid.diff compares programs: fluid.Program classes or instances, "
                    f"compiled programs, ProgramDescs or checkpoint directories; got "
                    f"{type(obj).__name__}")


def diff_sides(a: Side, b: Side, detail: str = "layers") -> ProgramDiff:
    """The difference of two sides (`side_of`); where both hold values, kept state also
    says how far apart its values are. ``detail`` is the level of the result's text."""
    (old, old_values, old_label), (new, new_values, new_label) = a, b
    if old_label == new_label:
        old_label, new_label = f"{old_label} (a)", f"{new_label} (b)"
    if old_values is None or new_values is None:
        return diff_programs(old, new, None, old_label, new_label, detail)
    before, after = old_values, new_values

    def same(name: str) -> bool:
        return same_value(before.get(name), after.get(name))

    result = diff_programs(old, new, same, old_label, new_label, detail)
    for change in result.state:
        if change.status == "kept":
            change.values = _value_note(before.get(change.name), after.get(change.name))
    return result


def _value_note(a: Any, b: Any) -> str:
    """'' when equal; otherwise how far apart two arrays are."""
    if a is b or not (hasattr(a, "shape") and hasattr(b, "shape")):
        return ""
    x = np.asarray(to_host(a), dtype=np.float64)
    y = np.asarray(to_host(b), dtype=np.float64)
    if x.shape != y.shape:
        return f"shape {list(x.shape)} -> {list(y.shape)}"
    if np.array_equal(x, y, equal_nan=True):
        return ""
    gap = np.abs(x - y)
    finite = gap[np.isfinite(gap)]
    biggest = f"{finite.max():.4g}" if finite.size else "inf"
    differ = int((~((x == y) | (np.isnan(x) & np.isnan(y)))).sum())
    return f"values differ: max |a - b| = {biggest}, {differ} of {x.size} differ"
