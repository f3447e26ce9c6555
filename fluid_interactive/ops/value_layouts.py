"""The layouts of the values ops read, by version, for state saved by an older version of
the package (checkpoints: runtime/live/checkpoint.py records `LAYOUT_VERSION`).

When an op comes to read an input in another layout, its file registers the change
(`register_layout_change`) with the version that brought it, and `upgrade` converts the
values a program saved under an older version:

* version 1: the layouts as first written;
* version 2: the Weight [D, 3D] of ``gru`` and ``gru_unit`` in Paddle's layout (W_ur
  [D, 2D] its first 2D*D values, W_c [D, D] the rest: ops/gru.py), where version 1 held
  [W_ur | W_c] side by side.

A var converted for an op is converted once, whichever ops read it, and so is the state
optimizer ops keep for it with its shape (moments follow their parameter element by
element; ``ir.diff_state.optimizer_state_of`` finds them from the ops). A var the program
also reads with another meaning (a weight tied to a ``matmul``) can keep only one: it
follows the op that changed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..ir.diff_state import optimizer_state_of
from ..ir.records import ProgramDesc

#: The version of the layouts this package's ops read.
LAYOUT_VERSION = 2


@dataclass(frozen=True)
class LayoutChange:
    """Input ``slot`` of an op reads a new layout from ``version`` on; ``convert`` turns a
    value in the layout before it into the new one."""
    version: int
    slot: str
    convert: Callable[[np.ndarray], np.ndarray]


_CHANGES: dict[str, list[LayoutChange]] = {}


def register_layout_change(op_type: str, slot: str, version: int,
                           convert: Callable[[np.ndarray], np.ndarray]) -> None:
    """Record that ``op_type`` reads input ``slot`` in a new layout from ``version`` on
    (at most `LAYOUT_VERSION`); ``convert`` maps an older value to it."""
    if not 1 < version <= LAYOUT_VERSION:
        raise ValueError(f"{op_type}.{slot}: a layout change's version must lie in "
                         f"[2, {LAYOUT_VERSION}] (raise LAYOUT_VERSION first), got {version}")
    _CHANGES.setdefault(op_type, []).append(LayoutChange(version, slot, convert))


def _changes_of_vars(program: ProgramDesc, version: int) -> dict[str, set[LayoutChange]]:
    """Each var an op reads in a slot whose layout changed after ``version`` -> the
    changes."""
    found: dict[str, set[LayoutChange]] = {}
    for block in program.blocks:
        for op in block.ops:
            for change in _CHANGES.get(op.type, ()):
                if change.version > version:
                    for name in op.input(change.slot):
                        found.setdefault(name, set()).add(change)
    return found


def upgrade(program: ProgramDesc, values: Mapping[str, np.ndarray], version: int
            ) -> dict[str, np.ndarray]:
    """``values`` (of ``program``'s persistable vars, saved under layout ``version``) in
    the layouts of `LAYOUT_VERSION`: new arrays where a layout changed, the others as
    they are."""
    out = dict(values)
    for name, changes in _changes_of_vars(program, version).items():
        if name not in out:
            continue
        shape = out[name].shape
        targets = [name] + [s for s in optimizer_state_of(program, name)
                            if s in out and out[s].shape == shape]
        steps = sorted({(c.version, c.convert) for c in changes}, key=lambda vc: vc[0])
        for target in targets:
            for _, convert in steps:
                out[target] = convert(out[target])
    return out
