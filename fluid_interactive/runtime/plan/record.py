"""A plan as a value: the record a block planned for one feed signature becomes, built in
one place (`assemble`) and never changed after.

It holds the generated function (`GeneratedCode`), what its kernels share (`PlanState`,
the compiled-kernel tier among it), what keeping it costs, and ``fn``: what a call runs,
the generated function itself or the thread and tier policy around it
(backend/threads.py). The plan cache's bookkeeping (which plans ran lately, what each
weighs once it ran) is the cache's own (cache.py).
"""
from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from math import prod
from typing import Any

import numpy as np

from ...backend import threads
from ...kernels import Kernel, PlanTier
from ...ops.plan_state import PlanState
from ...ops.scratch import Scratch
from ...ops.spec import OpSpec, TensorType
from .analysis import BlockAnalysis
from .buffers import PlanMemory
from .emitter import GeneratedCode


@dataclass(frozen=True)
class Plan:
    """A block planned for one feed signature (see the module docstring)."""
    code: GeneratedCode              # the generated function, its source and line map
    fn: Callable[..., Any]           # what a call runs: fn(scope values, *feeds)
    state: PlanState                 # what its kernels share
    work: int                        # elements a call touches (the thread policy's size)
    nbytes: int                      # its own buffers (0: they are the method's memory's)
    memory_keys: frozenset[tuple[str, int]]   # the blocks of the memory its buffers view
    # what keeping it costs, weighed once it ran (its kernels' own arrays), where its
    # buffers are the method's memory's
    weigh: Callable[[], int] | None = None

    @property
    def tier(self) -> Any:
        """Its compiled kernels' tier (kernels/tier.py's PlanTier), or None: it has none."""
        return self.state.tier if self.state.tier.kernels else None


def assemble(code: GeneratedCode, state: PlanState, analysis: BlockAnalysis,
             memory: PlanMemory | None, on_host: bool) -> Plan:
    """The record of a generated plan, with the call the thread policy wraps around its
    function (on the host: on a device the host's BLAS is not the step's)."""
    work = plan_work(analysis)
    tier = state.tier if state.tier.pending or state.tier.ready else None
    fn = threads.plan_call(code.fn, work, tier) if on_host else code.fn
    keys = frozenset(analysis.slots.keys()) if analysis.slots is not None else frozenset()
    if memory is None:
        return Plan(code, fn, state, work, buffer_bytes(analysis.steps), keys)
    # the method's memory is not the plan's: keeping the plan costs the arrays its kernels
    # made for themselves (a convolution's columns), weighed once it ran (kernels may
    # make them in their first call: cache.PlanCache.add)
    return Plan(code, fn, state, work, 0, keys, partial(kernel_bytes, code.fn, state, memory))


def plan_work(analysis: BlockAnalysis) -> int:
    """Elements a step of the plan touches: every var it reads or writes, counted once
    (the size the thread policy classes plans by)."""
    names = {n for step in analysis.steps for n in step.inputs + step.outputs}
    return sum(prod(analysis.types[n].shape) for n in names
               if n in analysis.types and all(d >= 0 for d in analysis.types[n].shape))


def buffer_bytes(steps: list) -> int:
    """The bytes of the distinct buffers a plan's steps write into (an arena once)."""
    seen: dict[int, Any] = {}
    for step in steps:
        for bufs in step.buffers.values():
            for buf in bufs:
                if buf is not None:
                    root = getattr(buf, "arena", buf)
                    seen[id(root)] = root
    return sum(prod(b.shape) * np.dtype(b.dtype).itemsize for b in seen.values())


def kernel_bytes(fn: Callable, state: PlanState, memory: PlanMemory) -> int:
    """The bytes of the arrays a plan's kernels hold of their own (arrays they made: not
    views of the method's ``memory``, nor of the family's scratch, which every size's plan
    takes its per-call arrays from, nor the values every size's plan shares), found
    through the generated function ``fn``'s names and the kernels' shared ``state``, a few
    references deep (`_REFERENCES`)."""
    shared = {id(b) for b in memory.blocks.values()}
    shared.update(id(b) for b in state.scratch.blocks())
    seen = {id(v) for v in state.every_size.values()}   # the family's: not walked
    total = 0
    names = getattr(fn, "__globals__", {})
    todo = [(v, 0) for k, v in names.items() if k != "__builtins__"]
    todo += [(v, 0) for v in state.values()]
    while todo:
        obj, depth = todo.pop()
        kind = _kind(type(obj))
        if kind is None:
            continue
        if kind is np.ndarray:
            root = obj
            while isinstance(root.base, np.ndarray):
                root = root.base
            if id(root) not in shared and id(root) not in seen:
                seen.add(id(root))
                total += root.nbytes
            continue
        if id(obj) in seen or depth > 3:
            continue
        seen.add(id(obj))
        todo += [(v, depth + 1) for v in kind(obj)]
    return total


# What never leads to an array a kernel made: values, types, op specs, code (compiled
# kernels and their handles among it: walking a compiled function's dispatcher cost a new
# size's plan a millisecond), and the family's shared scratch (every size's plan uses it:
# not one plan's)
_HOLDS_NO_ARRAY = (str, bytes, int, float, complex, type(None), types.BuiltinFunctionType,
                   np.ufunc, np.dtype, type, types.ModuleType, types.CodeType, TensorType,
                   OpSpec, Scratch, Kernel, PlanTier)


def _kind(cls: type) -> Any:
    """How the walk treats an object of class ``cls``, decided once per class (a new
    size's plan is weighed object by object): None, it holds no array; `np.ndarray`, it
    is one; else the function giving what it refers to."""
    kind = _KINDS.get(cls, _UNSEEN)
    if kind is _UNSEEN:
        if len(_KINDS) > 4096:   # classes made on the fly would otherwise stay forever
            _KINDS.clear()
        _KINDS[cls] = kind = _classify(cls)
    return kind


def _classify(cls: type) -> Any:
    if issubclass(cls, _HOLDS_NO_ARRAY):
        return None
    if issubclass(cls, np.ndarray):
        return np.ndarray
    for base, refs in _REFERENCES:
        if issubclass(cls, base):
            return refs
    return _attributes


def _function_refs(fn: types.FunctionType) -> list:
    refs = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    refs += [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
    return refs + list(fn.__dict__.values())   # attributes a kernel set on itself


def _attributes(obj: Any) -> list:
    refs = list(getattr(obj, "__dict__", {}).values())
    return refs + [getattr(obj, n, None) for n in getattr(type(obj), "__slots__", ())
                   if isinstance(n, str)]


#: what a kernel's arrays may be reached through: a container's items, a function's
#: closure and defaults, a bound method's object, a partial's arguments; any other
#: object's attributes (`_attributes`)
_REFERENCES: tuple[tuple[type | tuple[type, ...], Callable[[Any], list]], ...] = (
    (dict, lambda d: list(d.values())),
    ((list, tuple, set, frozenset), lambda items: list(items)),
    (types.FunctionType, _function_refs),
    (types.MethodType, lambda m: [m.__self__, m.__func__]),
    (partial, lambda p: [p.func, *p.args, *p.keywords.values()]),
)
#: each class met by the walk -> its kind (`_kind`)
_KINDS: dict[type, Any] = {}
_UNSEEN = object()


def _filled(cell: Any) -> bool:
    try:
        return cell.cell_contents is not _filled   # (reading it raises when not filled)
    except ValueError:
        return False
