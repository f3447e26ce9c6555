"""Watching values inside compiled methods: ``prog.watch('mlp')`` keeps the named vars of
every call, read afterwards from ``prog.watched``.

Inside a ``@fluid.network`` method everything is symbolic; a compiled call returns only what
the method returns. A watched method runs a second plan of the same block whose returns are
extended by the watched vars: the generated code hands them back with the result, and the
call stores them on the program before it returns the result as usual. Nothing else
changes: the step commits its updates as before (watched values are never written to the
scope), a failed call stores nothing, and the watched vars are taken out of buffer reuse,
so each call's values are arrays of their own.

Watching nothing costs nothing: a method nobody watches runs its own generated entry, the
same code as before anything was watched. ``prog.unwatch()`` puts it back.

A name selects vars by exact name (``'mlp/fc_0.tmp_2'``, ``'mlp/fc_0.w_0@GRAD'``), by
layer or scope (``'mlp/fc_0'``, ``'mlp'``: every var of the layer or scope, activations and
gradients alike), or by a pattern with ``*`` (``'*@GRAD'``).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...backend import array_module_for
from ...ir.layers import in_scope
from ...ir.records import BlockDesc
from ..plan.runner import BlockRunner

if TYPE_CHECKING:
    from .compiled import CompiledMethod, CompiledProgram

__all__ = ["Watched", "WatchSet", "select"]


def _matches(name: str, pattern: str) -> bool:
    if "*" in pattern or "?" in pattern or "[" in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    return name == pattern or in_scope(name, pattern)


def select(block: BlockDesc, patterns: Sequence[str], persistable: Mapping[str, Any]
           ) -> list[str]:
    """The tensor vars of ``block`` that ``patterns`` name, in declaration order; a
    persistable var of the program (a parameter) only when named exactly."""
    names = [n for n, v in block.vars.items()
             if v.kind == "tensor" and any(_matches(n, p) for p in patterns)]
    names += [p for p in patterns if p in persistable and p not in names]
    return names


class Watched(Mapping):
    """The values one call kept: ``{var name: array}``, with the method that ran
    (``method``) and the call's number among that program's watched calls (``call``)."""

    def __init__(self, method: str, call: int, values: dict):
        self.method, self.call, self._values = method, call, values

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"{name!r} was not watched in the last call of {self.method}(); "
                           f"it kept: {', '.join(self._values) or 'nothing'}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{n}: {list(getattr(v, 'shape', ()))}" for n, v in self.items())
        return f"<Watched call {self.call} of {self.method}(): {shapes or 'nothing'}>"


@dataclass
class WatchSet:
    """What a compiled program watches, and what its calls kept."""
    patterns: list[str] = field(default_factory=list)
    methods: set[str] | None = None          # None: every method
    last: Watched = field(default_factory=lambda: Watched("", 0, {}))   # of any method
    by_method: dict[str, Watched] = field(default_factory=dict)
    _calls: Any = field(default_factory=itertools.count)
    _installed: dict[str, Any] = field(default_factory=dict)   # method -> plain __call__
    _lock: Any = field(default_factory=threading.Lock)

    def record(self, method: str, values: dict) -> None:
        kept = Watched(method, next(self._calls) + 1, values)
        with self._lock:
            self.last = kept
            self.by_method[method] = kept


def _watching_call(method: CompiledMethod, names: list[str], watch: WatchSet) -> Any:
    """A ``__call__`` for ``method`` that runs a plan returning ``(result, watched)``."""
    block = method.runner.block
    owner = method.owner
    runner = BlockRunner(owner.program, dataclasses.replace(
        block, returns=(block.returns, {n: n for n in names})),
        array_module_for(owner.device), owner.seed, is_test=method.runner.is_test)
    entry = method.entry_for(runner)
    # The entry calls itself for keyword or converted arguments; that inner call must
    # give back the pair too, so it goes to the entry directly, not through `call`.
    run = type("_WatchingEntry", (), {"__call__": entry})()
    name = method.block.name

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        result, kept = run(*args, **kwargs)
        watch.record(name, kept)
        return result

    call.watched_runner = runner      # type: ignore[attr-defined]
    return call


def install(program: CompiledProgram, watch: WatchSet) -> dict[str, list[str]]:
    """Give each watched method of ``program`` its watching entry and each other method
    its plain one; returns what each method now keeps."""
    persistable = {n: v for n, v in program.program.global_block().vars.items()
                   if v.persistable and v.kind == "tensor"}
    kept: dict[str, list[str]] = {}
    for name, method in program.methods.items():
        plain = watch._installed.pop(name, None)
        if plain is not None:
            type(method).__call__ = plain
        if not watch.patterns or (watch.methods is not None and name not in watch.methods):
            continue
        names = select(method.block, watch.patterns, persistable)
        if not names:
            continue
        watch._installed[name] = type(method).__call__
        type(method).__call__ = _watching_call(method, names, watch)
        kept[name] = names
    return kept


def reinstall(program: CompiledProgram, watch: WatchSet) -> dict[str, list[str]]:
    """`install` after the methods' plain entries were made anew (the program was
    recompiled, or its history turned on or off): the plain entries kept from before are
    stale."""
    watch._installed.clear()
    return install(program, watch)
