"""The passes a block goes through when it is planned, in order. Each is pure
(``pass(program, block) -> block``), named, checked by `check_program` after it in the
tests, and tested to give the values of the block without it.

``FLUID_PLAN_PASSES=none`` in the environment turns them off (to compare, or to rule
them out while debugging); a comma-separated list of names keeps only those.
"""
from __future__ import annotations

import os
from collections.abc import Callable

from ..ir.records import BlockDesc, ProgramDesc
from .fuse import fuse_elementwise_chains, fuse_optimizer_updates
from .layout import choose_layouts

Pass = Callable[[ProgramDesc, BlockDesc], BlockDesc]

PLAN_PASSES: dict[str, Pass] = {
    "fuse_optimizer_updates": fuse_optimizer_updates,
    "choose_layouts": choose_layouts,     # before chains fuse: they fuse in the new layout
    "fuse_elementwise_chains": fuse_elementwise_chains,
}


def enabled_passes() -> list[Pass]:
    wanted = os.environ.get("FLUID_PLAN_PASSES")
    if wanted is None:
        return list(PLAN_PASSES.values())
    names = {n.strip() for n in wanted.split(",") if n.strip() and n.strip() != "none"}
    unknown = names - set(PLAN_PASSES)
    if unknown:
        raise ValueError(f"FLUID_PLAN_PASSES names unknown pass(es) {sorted(unknown)}; "
                         f"known: {', '.join(PLAN_PASSES)}")
    return [p for name, p in PLAN_PASSES.items() if name in names]


def plan_passes(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    """``block`` after every enabled plan pass."""
    for run in enabled_passes():
        block = run(program, block)
    return block
