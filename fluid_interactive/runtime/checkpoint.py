"""Saving and loading a compiled program: the program description and every persistable
var, written atomically; loading never evaluates code."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compiled import CompiledProgram


def save(compiled: "CompiledProgram", path: str) -> None:
    raise NotImplementedError("checkpoint saving is not implemented yet")


def load(path: str, device: str | None = None) -> "CompiledProgram":
    raise NotImplementedError("checkpoint loading is not implemented yet")
