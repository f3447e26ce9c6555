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
gradients alike), or by a pattern with ``*`` (``'*@GRAD'``). A rows-only gradient
(``embedding(is_sparse=True)``) is kept as the `SelectedRows` it is.
"""
from __future__ import annotations

import fnmatch
import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...ir.layers import in_scope
from ...ir.records import SELECTED_ROWS, BlockDesc
from ...util.selected_rows import SelectedRows

__all__ = ["Watched", "Watcher", "select"]

#: the kinds of vars a call can hand back: tensors, and rows-only gradients (a
#: `SelectedRows` each, as ``embedding(is_sparse=True)`` gives its table)
WATCHABLE = ("tensor", SELECTED_ROWS)


def _matches(name: str, pattern: str) -> bool:
    if "*" in pattern or "?" in pattern or "[" in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    return name == pattern or in_scope(name, pattern)


def select(blocks: Sequence[BlockDesc], patterns: Sequence[str],
           persistable: Mapping[str, Any]) -> list[str]:
    """The tensor vars of a method's ``blocks`` (its block and the blocks nested in it: a
    loop's body) that ``patterns`` name, in declaration order; a persistable var of the
    program (a parameter) only when named exactly. A var of a loop's body is kept once per
    iteration, stacked along a new first dim."""
    names = [n for block in blocks for n, v in block.vars.items()
             if v.kind in WATCHABLE and any(_matches(n, p) for p in patterns)]
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
        shapes = ", ".join(f"{n}: {_shown(v)}" for n, v in self.items())
        return f"<Watched call {self.call} of {self.method}(): {shapes or 'nothing'}>"


def _shown(value: Any) -> str:
    if isinstance(value, SelectedRows):
        return f"SelectedRows of {len(value.rows)} rows of {list(value.shape)}"
    return str(list(getattr(value, "shape", ())))


class Watcher:
    """What a compiled program watches, and what its calls kept: the program holds one
    and asks it, through `names_for`, which vars each method's entry must hand back."""

    def __init__(self) -> None:
        self.patterns: list[str] = []
        self.methods: set[str] | None = None         # None: every method
        self.last = Watched("", 0, {})              # the last call of any method
        self.by_method: dict[str, Watched] = {}
        self._calls = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, names: Sequence[str], methods: None | str | Sequence[str],
            blocks: Mapping[str, Sequence[BlockDesc]], persistable: Mapping[str, Any]
            ) -> None:
        """Watch ``names`` too (in ``methods`` only, when given); a name that selects no
        var of those methods is an error and changes nothing."""
        wanted = None if methods is None else {methods} if isinstance(methods, str) \
            else set(methods)
        for m in wanted or ():
            if m not in blocks:
                raise KeyError(f"watch: no method {m!r}; the methods are: "
                               f"{', '.join(blocks)}")
        for name in names:
            if not any(select(b, [name], persistable) for m, b in blocks.items()
                       if wanted is None or m in wanted):
                raise KeyError(f"watch: {name!r} names no var of "
                               f"{'any method' if wanted is None else ', '.join(wanted)}; "
                               f"give a var, a layer or var_scope such as 'mlp', or a "
                               f"pattern such as '*@GRAD' (the text form lists the vars)")
        self.patterns = list(dict.fromkeys(self.patterns + list(names)))
        self.methods = wanted

    def remove(self, names: Sequence[str]) -> None:
        """Stop watching ``names`` (none: everything)."""
        self.patterns = [p for p in self.patterns if names and p not in names]

    def names_for(self, blocks: Sequence[BlockDesc], descs: Mapping[str, Any]) -> list[str]:
        """The vars a call of a method must hand back (none: it runs its plain entry);
        ``blocks`` are its block and those nested in it, ``descs`` the program's persistable
        vars (a parameter is watched only when named exactly)."""
        if not self.patterns or (self.methods is not None
                                 and blocks[0].name not in self.methods):
            return []
        tensors = {n: v for n, v in descs.items() if v.kind == "tensor"}
        return select(blocks, self.patterns, tensors)

    def record(self, method: str, values: dict) -> None:
        kept = Watched(method, next(self._calls), values)
        with self._lock:
            self.last = kept
            self.by_method[method] = kept

    def last_of(self, method: str) -> Watched:
        return self.by_method.get(method, Watched(method, 0, {}))
