"""A program's state from nothing: running block 0's initialisers, and what else every
part of the live object needs to know about persistable values.

`initial_state` is the one way state is made: a new program runs every initialiser, a
loaded checkpoint runs those whose vars it does not hold (readers, above all: a file
handle is no array to save), and a recompilation runs the new class's into a separate
dict, from which it takes what the old state cannot give.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ...ir.records import OpRole, ProgramDesc, VarDesc
from ..plan.runner import BlockRunner


def persistable_descs(program: ProgramDesc) -> dict[str, VarDesc]:
    """Name -> declaration of every persistable var of ``program``."""
    return {v.name: v for v in program.global_block().vars.values() if v.persistable}


def is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def close_value(value: Any) -> None:
    """Release what a scope value holds (a reader's thread and file); arrays hold none."""
    close = getattr(value, "close", None)
    if close is not None and not is_array(value):
        close()


def close_values(values: Iterable[Any]) -> None:
    for value in list(values):
        close_value(value)


def no_history_reason(program: ProgramDesc) -> str | None:
    """Why ``program`` cannot keep a history, or None."""
    for block in program.blocks:
        if any(op.role & (OpRole.RPC | OpRole.DIST) for op in block.ops):
            return ("its methods send to and receive from parameter servers, whose state "
                    "a rewind of this program alone could not take back")
    return None


def initial_state(program: ProgramDesc, seed: int | None, xp: Any,
                  provided: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The values block 0's initialisers give every persistable var, except those
    ``provided`` already holds (which are in the result as given): an initialiser runs
    when any var it creates is missing.

    Each initialiser draws from a generator seeded by ``seed`` and the names it creates,
    so adding a parameter leaves every other parameter's first value as it was."""
    provided = provided or {}
    values = dict(provided)
    block0 = program.global_block()
    missing = [op for op in block0.ops if any(n not in values for n in op.output_names())]
    if not missing:
        return values
    todo = replace(block0, ops=missing)

    def rng_for(op_index: int) -> Any:
        names = todo.ops[op_index].output_names() if op_index >= 0 else []
        if seed is None:
            return np.random.default_rng()
        return np.random.default_rng([seed, zlib.crc32("|".join(names).encode())])

    BlockRunner(program, todo, xp, seed, rng_for).run_once(values)
    for name, value in provided.items():   # an initialiser of several vars ran for one
        if values[name] is not value:
            close_value(values[name])
            values[name] = value
    return values
