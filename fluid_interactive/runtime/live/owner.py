"""What the parts of a live program may ask of the program that holds them.

`CompiledMethod`, `Timeline` and `recompile` work for a `CompiledProgram`, but they know it
only through `Owner`: the few attributes they need. So none of them imports the program's
class, and the program's class imports them, never the other way round.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ...ir.records import ProgramDesc
from .origin import Origin
from .scope import Scope
from .watch import Watcher


class Method(Protocol):
    """A compiled method as its program's parts see it."""

    def refresh(self) -> None: ...

    def retire(self, why: str) -> None: ...


class Owner(Protocol):
    """A compiled program as its parts see it."""

    program: ProgramDesc
    scope: Scope
    seed: int | None
    device: str
    origin: Origin | None
    watcher: Watcher

    @property
    def methods(self) -> Mapping[str, Method]: ...

    @property
    def array_module(self) -> Any: ...

    @property
    def label(self) -> str: ...

    @property
    def timeline(self) -> Any: ...

    def install(self, program: ProgramDesc, origin: Origin | None) -> None: ...
