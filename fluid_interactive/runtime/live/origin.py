"""Where a compiled program came from, so that it can be built again from an edited class.

The runtime cannot trace a `fluid.Program` class (tracing is the frontend's), so the
frontend hands `CompiledProgram` an `Origin` holding the class, the options and compile
arguments it was compiled with, and ``retrace``: a function that traces a class into a
`Traced` program and does nothing else. Recompiling calls ``retrace``, never
``Compile()``, which is the public verb that may also start a distributed job.

Programs with an origin are kept in a weak registry (`live_programs`), which the notebook
extension walks when a class is defined again.
"""
from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...ir.records import ProgramDesc


@dataclass
class Traced:
    """A class traced into a program: the program, the values its state starts from that
    tracing fixed (e.g. a `NumpyArrayInitializer`'s array), and ``attach(compiled)``, run
    once the program belongs to a compiled object (the frontend's reader handles bind to
    it there)."""
    program: ProgramDesc
    initial_values: Mapping[str, Any] = field(default_factory=dict)
    attach: Callable[[Any], None] = lambda compiled: None


@dataclass
class Origin:
    """``source_class(**options)``, traced and compiled with ``compile_args``."""
    source_class: type
    options: dict[str, Any]
    compile_args: dict[str, Any]
    retrace: Callable[[type, Mapping[str, Any]], Traced]

    def known_options(self, cls: type) -> tuple[dict[str, Any], list[str]]:
        """The options ``cls`` still has, and the names of those it no longer has."""
        names = cls.option_names() if hasattr(cls, "option_names") else []
        kept = {k: v for k, v in self.options.items() if k in names}
        return kept, sorted(k for k in self.options if k not in names)


_live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_order = itertools.count()


def register_live(compiled: Any) -> None:
    """Keep ``compiled`` (weakly) among the programs `live_programs` lists."""
    _live[next(_order)] = compiled


def forget_live(compiled: Any) -> None:
    for key in [k for k, p in _live.items() if p is compiled]:
        _live.pop(key, None)


def live_programs() -> list[Any]:
    """Every program compiled from a `fluid.Program` class that is still alive, oldest
    first (what the notebook extension recompiles when a class is defined again)."""
    return [p for _, p in sorted(_live.items())]
