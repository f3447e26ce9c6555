"""One plan for every batch size and sequence length: the plans of a method grouped by
what their code depends on.

A method's data vars declare the dims that vary from call to call as -1 (the batch, a
sequence's length). Calls whose feeds agree on everything else (ranks, dtypes, the
declared dims) belong to one **family**, and a family is one plan: one generated
function (the text names kernels, never sizes: `loops.finish` compiles it once), one
memory of buffers sized to the largest call (`buffers.PlanMemory`), and one table of
kernels (`KernelReuse`).

What still depends on a concrete size is said, not hidden. A kernel factory receives
concrete types (ops/spec.py: the kernel contract), so the step of an op that reads or
writes a var whose shape follows a symbolic dim gets its kernel prepared for each size
it is called with: a **specialisation**, listed by `prog.<method>.plans` with the op, the
var it comes from and the sizes it was prepared for. Everything else about the plan is
shared, and a step whose whole kernel input is the same at another size (its types, its
buffers, its constant inputs: an optimizer's update of the parameters, what is computed
from parameters alone) is prepared once and serves every size.

A kernel that bakes a size into itself is therefore never reused at another one: its
inputs differ there (a mean over the batch reads a var of the batch's size; an op that
reads a shape alone, `fill_constant_batch_size_like`, reads its input's type), or its
constant inputs do (the value of `shape(x)` is folded per size); reuse needs them all
equal. Random ops, steps whose shapes are known only when they run, and kernels that
share state with other kernels of their plan (`KernelContext.shared`: the compiled tier,
a convolution's columns) are prepared per size as well.
"""
from __future__ import annotations

import statistics
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Any, TypeVar

from ...backend import threads
from ...kernels import PlanTier
from ...ops.plan_state import PlanState
from ...ops.scratch import Scratch
from ...ops.spec import TensorType
from .analysis import BlockAnalysis, Step
from .buffers import ArenaSlot, MemorySlot

__all__ = ["Family", "KernelReuse", "PlanFamily", "Specialisation", "family_key",
           "TrackedState"]

Shapes = tuple[tuple[int, ...], ...]
T = TypeVar("T")


def family_key(declared: Sequence[tuple[int, ...]], shapes: Shapes) -> Shapes:
    """The feeds' shapes with each dim declared -1 (symbolic: any size) as -1: what the
    family's code depends on. The rank stays (a rank-2 and a rank-3 feed are two plans)."""
    return tuple(tuple(-1 if i < len(decl) and decl[i] < 0 else d
                       for i, d in enumerate(shape))
                 for shape, decl in zip(shapes, declared))


class TrackedState(PlanState):
    """A plan's shared kernel state (ops/plan_state.py) that records whether the kernel
    being prepared reached it (its tier or a shared value), so that `KernelReuse` keeps
    only kernels that share nothing with others (what they share is one size's)."""

    __slots__ = ("asked",)

    def __init__(self) -> None:
        self.asked = False
        super().__init__()

    @property
    def tier(self) -> PlanTier:
        self.asked = True
        return _TIER.__get__(self)

    @tier.setter
    def tier(self, value: PlanTier) -> None:
        _TIER.__set__(self, value)

    def shared(self, kind: type[T], key: Hashable, make: Callable[[], T] | None = None) -> T:
        self.asked = True
        return super().shared(kind, key, make)


_TIER = PlanState.__dict__["tier"]   # the slot TrackedState's property stands in front of


def _buffer_signature(buf: Any) -> tuple | None:
    """What a planned buffer is, independently of the plan that made it: the block of the
    method's memory, the offset, the shape and dtype; None for a buffer of a plan's own."""
    if buf is None:
        return ()
    if isinstance(buf, MemorySlot):
        return ("memory", buf.key, buf.shape, buf.dtype)
    if isinstance(buf, ArenaSlot):
        arena = _buffer_signature(buf.arena)
        return None if not arena else ("arena", arena, buf.offset, buf.shape, buf.dtype)
    return None   # a BufferSlot of the plan's own, or an array lent to it


def _constant_signature(value: Any) -> tuple:
    return (getattr(value, "shape", None), str(getattr(value, "dtype", type(value))),
            value.tobytes() if hasattr(value, "tobytes") else repr(value))


class KernelReuse:
    """The kernels of a family's steps that serve every size: keyed by the step and all
    that its kernel factory receives (`signature`).

    A step whose inputs follow a symbolic dim has a signature for each size, never asked
    for again at another one: once a var of it has changed between sizes (`drop_steps`),
    its kernels are neither looked up nor kept (those kept before are dropped then),
    so that they and their per-size arrays go with the plans the cache drops. At most
    ``limit`` are kept besides, the least recently used going first; the kernels that do
    serve every size are asked for at each new size, so they stay."""

    def __init__(self, limit: int = 256) -> None:
        self.kernels: OrderedDict[tuple, Any] = OrderedDict()
        # the steps reading or writing a var whose shape changed between the sizes
        # planned: a signature per size, which another size never asks for again, so
        # their kernels are neither looked up nor kept (computing it cost each new size)
        self.per_size: set[int] = set()
        self.keys_of: dict[tuple, set] = {}   # signature -> the memory blocks it uses
        self.limit = limit
        self.added: list[tuple] = []   # kept while the plan being built is (`undo`)
        self.reused = 0
        self.texts: dict[int, str] = {}   # each step's text line, the same at every size

    def signature(self, step: Step, types: dict[str, TensorType],
                  constants: dict[str, Any]) -> tuple | None:
        """Everything a step's kernel factory receives besides its op, or None when the
        kernel may not serve another plan (random draws, a buffer of the plan's own)."""
        if step.spec.random or step.index in self.per_size:
            return None
        bufs = []
        for slot in sorted(step.buffers):
            for buf in step.buffers[slot]:
                sig = _buffer_signature(buf)
                if sig is None:
                    return None
                bufs.append((slot, sig))
        names = step.inputs + step.outputs
        if any(d < 0 for n in names for d in types[n].shape):
            return None   # shapes known only when it runs (a DynamicKernel per plan)
        return (step.index, id(step.op), tuple(types[n] for n in names), tuple(bufs),
                tuple(_constant_signature(constants[n]) for n in step.inputs
                      if n in constants))

    def get(self, signature: tuple | None) -> Any:
        if signature is None:
            return None
        kernel = self.kernels.get(signature)
        if kernel is not None:
            self.kernels.move_to_end(signature)
            self.reused += 1
        return kernel

    def put(self, signature: tuple | None, kernel: Any, shared: bool) -> None:
        """Keep ``kernel`` for other sizes, unless it asked for shared state."""
        if signature is None or shared:
            return
        self.kernels[signature] = kernel
        self.keys_of[signature] = {k for _, sig in signature[3] for k in _blocks(sig)}
        self.added.append(signature)
        while len(self.kernels) > self.limit:
            oldest, _ = self.kernels.popitem(last=False)
            self.keys_of.pop(oldest, None)

    def undo(self) -> None:
        """Drop the kernels kept since the last `commit`: their plan failed to build."""
        for sig in self.added:
            self.kernels.pop(sig, None)
            self.keys_of.pop(sig, None)
        self.added = []

    def commit(self) -> None:
        """The kernels kept since the last commit belong to a plan that was built."""
        self.added = []

    def drop_steps(self, indices: Set[int]) -> None:
        """The steps ``indices`` are per size from now on: drop their kernels, prepared
        for one size and kept while no size had shown that they depend on it."""
        self.per_size.update(indices)
        for sig in [s for s in self.kernels if s[0] in indices]:
            del self.kernels[sig]
            self.keys_of.pop(sig, None)

    def forget(self, stale: Iterable) -> None:
        """Drop the kernels whose buffers are views of memory blocks since replaced."""
        stale = set(stale)
        for sig in [s for s, keys in self.keys_of.items() if keys & stale]:
            del self.kernels[sig], self.keys_of[sig]


def _blocks(sig: tuple) -> list:
    """The memory blocks a buffer signature is a view of."""
    if not sig:
        return []
    return [sig[1]] if sig[0] == "memory" else _blocks(sig[1])


@dataclass(frozen=True)
class Specialisation:
    """A step of a plan whose kernel is prepared for each concrete size: ``op`` (its
    type) at ``index`` in the block, because it reads or writes ``var``, whose shape
    follows a symbolic dim; ``shapes``: the shapes of ``var`` it was prepared for."""
    op: str
    index: int
    var: str
    shapes: tuple[tuple[int, ...], ...]

    def __repr__(self) -> str:
        shapes = ", ".join("[" + ", ".join(map(str, s)) + "]" for s in self.shapes)
        return f"<{self.op} (op {self.index}): per size of {self.var!r}: {shapes}>"


class Family:
    """What a family's plans have learnt: each step's types at each size planned, the
    kernels that serve every size, and the thread policy's latest choice."""

    def __init__(self, key: Shapes, declared: dict[str, tuple[int, ...]]):
        self.key = key
        self.declared = declared          # var -> declared shape (-1: symbolic)
        self.kernels = KernelReuse()
        self.scratch = Scratch()          # per-call arrays, shared by every size's kernels
        self.every_size: dict = {}        # values every size's kernels share (PlanState)
        self.steps: dict[int, tuple[str, tuple[str, ...]]] = {}
        self.seen: dict[str, dict[tuple[int, ...], None]] = {}
        self.sizes: dict[Shapes, None] = {}   # every size planned (kept or not)
        self.threads: Any = None          # the latest plan's thread policy
        self.build_ms: deque[float] = deque(maxlen=64)   # the latest plans' planning times

    def note(self, shapes: Shapes, analysis: BlockAnalysis) -> None:
        """Record a plan built for ``shapes``."""
        self.sizes[shapes] = None
        # room for one size's kernels and those serving every size
        self.kernels.limit = max(self.kernels.limit, 2 * len(analysis.steps))
        per_size = set()
        for step in analysis.steps:
            names = tuple(dict.fromkeys(step.inputs + step.outputs))
            self.steps[step.index] = (step.op.type, names)
            for n in names:
                t = analysis.types.get(n)
                if t is not None:
                    self.seen.setdefault(n, {})[tuple(t.shape)] = None
            if any(map(self.changed, names)):
                per_size.add(step.index)
        self.kernels.drop_steps(per_size)

    def timed(self, ms: float) -> None:
        """Record how long planning a size took (its types, buffers, kernels, code)."""
        self.build_ms.append(ms)

    def start_threads(self, call: Any) -> None:
        """A new size's call, when a thread policy measures it (backend/threads.py,
        AdaptiveThreads), starts with the count the family's latest size measured, rather
        than one thread: a size class apart is the same code on much the same work, and
        its first calls would otherwise run on one core whatever the others found."""
        if not isinstance(call, threads.AdaptiveThreads):
            return
        last = self.threads
        if last is not None and last.counts == call.counts:
            call.option = (last.option[0], None)   # its own kernels: measured anew
        self.threads = call

    def changed(self, name: str) -> bool:
        """Whether ``name``'s shape differed between two of the sizes planned."""
        return len(self.seen.get(name, ())) > 1

    def symbolic(self, name: str) -> bool:
        """Whether ``name``'s shape follows a symbolic dim: it changed between sizes, or
        it is declared with a dim unknown until run time."""
        return self.changed(name) or any(d < 0 for d in self.declared.get(name, ()))

    def specialisations(self) -> tuple[Specialisation, ...]:
        found = []
        for index in sorted(self.steps):
            op, names = self.steps[index]
            var = next((n for n in names if self.symbolic(n)), None)
            if var is not None:
                found.append(Specialisation(op, index, var, tuple(self.seen.get(var, ()))))
        return tuple(found)

    def shape_free(self) -> tuple[str, ...]:
        """The ops whose kernels serve every size of the family."""
        special = {s.index for s in self.specialisations()}
        return tuple(dict.fromkeys(op for i, (op, _) in sorted(self.steps.items())
                                   if i not in special))


@dataclass(frozen=True)
class PlanFamily:
    """One plan of a method (`BlockRunner.families`, `prog.<method>.plans`): ``inputs``
    the feeds' shapes, -1 where it serves any size; ``shapes`` the concrete shapes it is
    prepared for now (the plan cache keeps a bounded number); ``functions`` the generated
    functions they run (1: one for every size); ``specialised`` the steps whose kernels
    are prepared per size, with the var that makes them so and the sizes; ``shape_free``
    the ops whose kernels serve every size; ``sizes_planned`` every size it was called
    with; ``kernels_reused`` how many kernel preparations a size took from another;
    ``planning_ms`` what planning a size took, the median of the latest plans built (what
    a call at a new size costs on top of a call at a known one)."""
    inputs: Shapes
    shapes: tuple[Shapes, ...]
    specialised: tuple[Specialisation, ...]
    shape_free: tuple[str, ...]
    functions: int
    sizes_planned: int
    kernels_reused: int
    planning_ms: float = 0.0

    @property
    def per_size(self) -> tuple[str, ...]:
        """The op types of ``specialised``."""
        return tuple(dict.fromkeys(s.op for s in self.specialised))

    def __repr__(self) -> str:
        dims = ", ".join("[" + ", ".join("?" if d < 0 else str(d) for d in s) + "]"
                         for s in self.inputs)
        reasons = "; ".join(f"{s.op} (op {s.index}) by {s.var!r}" for s in self.specialised)
        return (f"<plan for ({dims}): {len(self.shapes)} shape(s) prepared of "
                f"{self.sizes_planned} called, {self.functions} generated function(s), "
                f"{self.planning_ms:.1f} ms to plan a size; "
                f"kernels per size: {reasons or 'none'}; one kernel for every size: "
                f"{', '.join(self.shape_free) or 'none'}>")


def report(family: Family, shapes: Sequence[Shapes], functions: int) -> PlanFamily:
    return PlanFamily(family.key, tuple(shapes), family.specialisations(),
                      family.shape_free(), functions, len(family.sizes),
                      family.kernels.reused,
                      statistics.median(family.build_ms) if family.build_ms else 0.0)
