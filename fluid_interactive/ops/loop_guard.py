"""What keeps a runaway ``while`` from eating the process.

A training loop keeps, per iteration, the values its gradient reads (`ops.control`), so a
loop whose condition never turns false grows memory as fast as it runs. Two guards:

``max_iterations``
    an attr of the ``while`` op (``fluid.layers.While(..., max_iterations=N)``): a call
    that would start iteration N+1 stops with a `LoopLimitError` naming the loop and the
    user's line; nothing is committed.
the saved-size warning
    a `LoopMemoryWarning` when the values one call of one loop keeps for its gradient
    pass `loop_saved_limit` bytes (default 1 GiB; ``FLUID_LOOP_SAVED_WARN``, e.g. ``512M``).

The generated loop pays one comparison of two ints per iteration for both: it calls its
`LoopWatch` when the run count reaches the watch's next checkpoint, and the watch sets the
next one. The saved values are measured incrementally (each run's once), at checkpoints
that double until the size comes near the limit and then fall where the runs so far say
it will be crossed, so measuring costs O(1) per iteration.
"""
from __future__ import annotations

import math
import os
import warnings
from typing import Any

from ..errors import LoopLimitError, LoopMemoryWarning, OpArgumentError
from ..ir.records import OpDesc
from ..ir.source import format_location

DEFAULT_SAVED_WARN = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``'512M'`` -> 536870912: bytes, with an optional K/M/G/T suffix (powers of 1024,
    ``KB``/``MiB`` spellings too)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    number = t[:-1] if unit else t
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"{text!r} is not a size; write bytes, or a number with K, M, G "
                         f"or T (e.g. 512M)") from None
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{text!r} is not a size of at least one byte")
    return int(value)


def _from_env() -> int:
    text = os.environ.get("FLUID_LOOP_SAVED_WARN")
    if not text:
        return DEFAULT_SAVED_WARN
    try:
        return parse_size(text)
    except ValueError as e:
        warnings.warn(f"FLUID_LOOP_SAVED_WARN ignored: {e}", LoopMemoryWarning, stacklevel=2)
        return DEFAULT_SAVED_WARN


_settings = {"saved_warn": _from_env()}


def loop_saved_limit(nbytes: int | str | None = None) -> int:
    """The size above which the values one call of a training ``While`` keeps for its
    gradient give a `LoopMemoryWarning` (bytes, or a text such as ``'512M'``); returns
    the setting (without an argument, only returns it). Default 1 GiB, or
    ``FLUID_LOOP_SAVED_WARN`` when set. Plans built before read the new value too."""
    if nbytes is not None:
        if isinstance(nbytes, str):
            nbytes = parse_size(nbytes)
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise ValueError(f"loop_saved_limit takes bytes (an int >= 1) or a size such "
                             f"as '512M', got {nbytes!r}")
        _settings["saved_warn"] = nbytes
    return _settings["saved_warn"]


def check_max_iterations(value: Any, what: str) -> int:
    """``value`` as the attr (0: no limit), or an `OpArgumentError` saying what fits."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OpArgumentError(f"{what}: max_iterations must be an int >= 1 (or None for no "
                              f"limit), got {value!r}")
    return value


def loop_name(op: OpDesc, keeps: str) -> str:
    """The loop's name as the user knows it: its layer's name (``while_0``, or the
    ``name=`` given), which names the var of its kept runs (``<name>.step_scopes``)."""
    kept = op.outputs.get(keeps) or []
    return kept[0].rsplit(".step_scopes", 1)[0] if kept else op.type


def saved_bytes(value: Any) -> int:
    """The bytes of arrays in one run's kept values (tuples, lists of runs of nested loops,
    None for a value kept for its shape alone)."""
    if isinstance(value, (tuple, list)):
        return sum(saved_bytes(v) for v in value)
    return int(getattr(value, "nbytes", 0) or 0)


class LoopGuard:
    """The guards of one ``while`` op of a plan; ``watch()`` starts one call's watch."""

    def __init__(self, op: OpDesc, keeps: str, max_iterations: int, saves: bool):
        self.name = loop_name(op, keeps)
        self.loc = op.loc
        self.max_iterations = max_iterations
        self.saves = saves

    @property
    def needed(self) -> bool:
        """Whether the loop has anything to guard (a limit, or values it keeps)."""
        return bool(self.max_iterations) or self.saves

    def watch(self) -> LoopWatch:
        return LoopWatch(self)

    def where(self) -> str:
        return f"the While loop {self.name!r} (recorded at " \
               f"{format_location(self.loc) or 'an unknown line'})"

    def stop(self, runs: int) -> LoopLimitError:
        return LoopLimitError(
            f"{self.where()} ran {runs} iterations, its max_iterations, and its condition "
            f"still holds, so the call was stopped; no state was changed. A loop that does "
            f"not end usually has a condition its body never makes false (a counter it "
            f"does not increment); if it needs more iterations, raise max_iterations.")

    def warn(self, runs: int, nbytes: int, limit: int) -> None:
        message = (f"{self.where()} keeps {_mib(nbytes)} of values for its gradient after "
                   f"{runs} iterations of one call, more than fluid.loop_saved_limit() "
                   f"({_mib(limit)}; FLUID_LOOP_SAVED_WARN sets it). A loop that does not "
                   f"end grows this until memory runs out: give the While max_iterations=, "
                   f"or is_test=True where no gradient goes through it.")
        if self.loc is None:
            warnings.warn(message, LoopMemoryWarning, stacklevel=3)
            return
        warnings.warn_explicit(message, LoopMemoryWarning, self.loc.file, self.loc.line,
                               registry=_REGISTRY)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


# once per message and line, as warnings.warn gives it for a module (the message names the
# loop and the limit, not the run count)
_REGISTRY: dict = {}


class LoopWatch:
    """One call's watch of one loop: the generated code calls it, at the top of an
    iteration, when its run count (iterations done) equals ``next``."""

    __slots__ = ("guard", "next", "total", "upto")

    def __init__(self, guard: LoopGuard):
        self.guard, self.total, self.upto = guard, 0, 0
        self.next = 1 if guard.saves else guard.max_iterations

    def __call__(self, runs: int, kept: list | None) -> None:
        guard = self.guard
        if guard.max_iterations and runs >= guard.max_iterations:
            raise guard.stop(runs)
        step = -1   # never again, unless a limit or the size says otherwise
        if guard.saves and kept is not None and self.upto >= 0:
            step = self._measure(runs, kept)
        if guard.max_iterations:
            ahead = guard.max_iterations - runs
            step = ahead if step < 0 else min(step, ahead)
        self.next = runs + step if step > 0 else -1

    def _measure(self, runs: int, kept: list) -> int:
        """Add the runs kept since the last look; warn past the limit (then measure no
        more in this call). Returns how many runs until the next look."""
        self.total += sum(saved_bytes(v) for v in kept[self.upto:])
        self.upto = len(kept)
        limit = _settings["saved_warn"]
        if self.total > limit:
            self.guard.warn(runs, self.total, limit)
            self.upto = -1
            return -1
        per_run = self.total / max(runs, 1)
        gap = math.ceil((limit - self.total) / per_run) if per_run else runs
        return max(1, min(gap, runs))
