"""Writing the lines of a generated function: Python locals for vars, one line per kernel
call, and the record that maps a generated line back to its op."""
from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ...ir.names import escape_unprintable, fresh_name
from ...ir.records import BlockDesc, OpDesc, ProgramDesc
from ...ir.text import format_op
from ...ops.apply import flat_inputs, infer_op, prepare_kernel
from ...ops.plan_state import PlanState
from ...ops.registry import get_spec
from ...ops.spec import Forward, TensorType
from .analysis import BlockAnalysis, Step
from .family import KernelReuse, TrackedState


@dataclass(frozen=True)
class GeneratedCode:
    """A generated function: a method's plan, or the function of a sub-block it calls."""
    fn: Callable
    source: str                  # its text and, below it, that of the functions it calls
    filename: str
    line_to_op: Mapping[int, int]   # generated line -> op index in the block
    block: int = -1              # the index of the block it runs
    # every function it calls, directly or not, by file name
    children: Mapping[str, GeneratedCode] = field(default_factory=dict)
    # op index -> the local counting the runs of that op's sub-block
    counters: Mapping[int, str] = field(default_factory=dict)
    text: str = ""               # its own text (``source`` adds the functions it calls)


def py_name(name: str, used: set[str]) -> str:
    """A fresh ASCII identifier that recalls ``name`` (any text a program holds)."""
    candidate = fresh_name(_identifier(name), used.__contains__, sep="_")
    used.add(candidate)
    return candidate


_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


@lru_cache(maxsize=8192)   # the same names at every size a method is planned for
def _identifier(name: str) -> str:
    """An ASCII identifier that recalls ``name``, not a keyword, not private."""
    base = _NOT_IDENTIFIER.sub("_", name)
    if not base or base[0].isdigit() or keyword.iskeyword(base) or base.startswith("_"):
        base = "v_" + base
    return base


def comment(text: str) -> str:
    """Text for a ``# ...`` comment of generated code. Names and locations in it may come
    from a file: a line break in them would end the comment and run the rest, so every
    non-printable character is escaped (`format_op` does so already; this is the one gate
    all generated comments pass)."""
    return escape_unprintable(text)


class Emitter:
    """Keeps the mapping from var names to Python locals while lines are emitted."""

    def __init__(self, reserved: set[str]):
        self.used = set(reserved)
        self.local: dict[str, str] = {}
        self.real: set[str] = set()          # the names that are locals of the function
        self.namespace: dict[str, Any] = {}
        self.lines: list[str] = []
        self.line_to_op: dict[int, int] = {}
        self.counters: dict[int, str] = {}
        self.children: dict[str, GeneratedCode] = {}
        self.sources: dict[str, str] = {}    # the text of each called function, by file
        # a var of a sub-block whose value of each run is gathered -> the local list
        self.collected: dict[str, str] = {}
        # the locals of lists that grow by one entry per run of a loop (kept or gathered
        # values): emptied when the function fails (loops.py)
        self.runs: list[str] = []
        # vars whose arrays no later step of this function writes, so that they may leave
        # it (a sub-block's results): feeds, constants, new arrays and views of those
        self.safe: set[str] = set()

    def bind(self, value: Any, prefix: str) -> str:
        name = py_name(prefix, self.used)
        self.namespace[name] = value
        return name

    def fresh(self, hint: str) -> str:
        name = py_name(hint, self.used)
        self.real.add(name)
        return name

    def fresh_local(self, var: str) -> str:
        name = self.fresh(var)
        self.local[var] = name
        return name

    def emit(self, text: str, op_index: int | None = None) -> None:
        self.lines.append("    " + text)
        if op_index is not None:
            self.line_to_op[len(self.lines) + 1] = op_index  # +1 for the def line


@dataclass
class StepPlan:
    """What emitting the steps of one block needs."""
    program: ProgramDesc
    block: BlockDesc
    analysis: BlockAnalysis
    xp: Any
    rng_for: Callable[[int], Any]
    is_test: bool
    tag: str
    subplans: Any                                   # loops.SubPlans
    plan_state: PlanState = field(default_factory=PlanState)  # what its kernels share
    # vars of the sub-blocks this function runs whose value of every run it gathers
    collect: frozenset[str] = frozenset()
    # the kernels that serve every size of the plan's family
    reuse: KernelReuse | None = None

    def describe(self, step: Step) -> str:
        """The op's text line, with declared types: the same for every plan of the block
        (kept by the family, when there is one, for its other sizes)."""
        texts = None if self.reuse is None else self.reuse.texts
        text = None if texts is None else texts.get(step.index)
        if text is None:
            text = comment(format_op(step.op, lambda n: self.program.find_var(self.block, n)))
            if texts is not None:
                texts[step.index] = text
        return text


def dynamic(types: dict[str, TensorType], names: list[str]) -> bool:
    """Whether a step's shapes are known only when it runs: they depend on a loop's trip
    count (a stacked tensor array) or on values (nonzero, unique and what follows them:
    their shape rules leave such dims -1), so the plan cannot fix them."""
    return any(d < 0 for n in names for d in types[n].shape)


class DynamicKernel:
    """The kernel of a step whose shapes are known only when it runs: prepared for each new
    set of input shapes (then cached). An output whose shape the plan knows all the same
    (a parameter's gradient after a gather by nonzero's rows) goes into its planned
    buffer, as a static step's would: a fused update then reads it in its arena; the
    others are allocated."""

    def __init__(self, op: OpDesc, types: dict[str, TensorType], xp: Any, rng: Any,
                 is_test: bool, buffers: dict[str, list[Any]] | None = None):
        self.op, self.xp, self.rng, self.is_test = op, xp, rng, is_test
        spec = get_spec(op.type)
        self.inputs = flat_inputs(spec, op)
        self.planned = {n: types[n] for n in self.inputs}
        self.planned_out = {n: types[n] for names in op.outputs.values() for n in names}
        self.buffers = buffers or {}
        self.kernels: dict[tuple, Any] = {}

    def __call__(self, *args: Any) -> Any:
        key = tuple(getattr(a, "shape", None) for a in args)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = self._prepare(args)
        return args[kernel.input_index] if isinstance(kernel, Forward) else kernel(*args)

    def _prepare(self, args: tuple) -> Any:
        known = dict(self.planned)
        for name, a in zip(self.inputs, args):
            if hasattr(a, "shape"):
                known[name] = TensorType(tuple(a.shape), known[name].dtype, known[name].kind)
        types = dict(known)
        for slot, ts in infer_op(self.op, known.__getitem__).items():
            types.update(zip(self.op.outputs[slot], ts))
        buffers = {slot: [b if types[n] == self.planned_out[n] else None
                          for n, b in zip(self.op.outputs.get(slot, ()), bufs)]
                   for slot, bufs in self.buffers.items()}
        return prepare_kernel(self.op, types.__getitem__, self.xp, buffers, rng=self.rng,
                              is_test=self.is_test)


def emit_kernel_step(em: Emitter, plan: StepPlan, step: Step) -> None:
    """One line: the op's kernel called on its inputs, its outputs bound to new locals."""
    asked = len(plan.plan_state.tier.kernels)   # the compiled kernels it asks for follow
    kernel = _kernel(plan, step)
    text = plan.describe(step)
    if isinstance(kernel, Forward):  # the output is an input: bind, call nothing
        source = step.inputs[kernel.input_index]
        em.emit(f"{em.fresh_local(step.outputs[0])} = {em.local[source]}  # {text}",
                step.index)
        if source in em.safe:
            em.safe.add(step.outputs[0])
        return
    k = em.bind(kernel, f"k{step.index}_{step.op.type}")
    args = ", ".join(em.local[n] for n in step.inputs)
    outs = [em.fresh_local(n) for n in step.outputs]
    target = outs[0] if len(outs) == 1 else ", ".join(outs)
    assign = f"{target} = " if outs else ""   # an op of no outputs runs for its effects
    labels = dict.fromkeys(k.label for k in plan.plan_state.tier.kernels[asked:])
    em.emit(f"{assign}{k}({args})  # {text}{_tier_note(list(labels))}", step.index)
    _mark_safe(em, step)


def _kernel(plan: StepPlan, step: Step) -> Any:
    """The step's kernel: one the plan's family prepared for another size with the same
    inputs (family.KernelReuse), else prepared now."""
    analysis, reuse, state = plan.analysis, plan.reuse, plan.plan_state
    signature = None if reuse is None else reuse.signature(step, analysis.types,
                                                           analysis.constants)
    kernel = None if reuse is None else reuse.get(signature)
    if kernel is not None:
        return kernel
    rng = plan.rng_for(step.index) if step.spec.random else None
    if dynamic(analysis.types, step.inputs + step.outputs):
        return DynamicKernel(step.op, analysis.types, plan.xp, rng, plan.is_test,
                             step.buffers)
    if isinstance(state, TrackedState):
        state.asked = False
    kernel = prepare_kernel(step.op, analysis.types.__getitem__, plan.xp, step.buffers,
                            rng, plan.is_test, analysis.constants, state)
    if reuse is not None:   # one that shares state with its plan's kernels serves one size
        reuse.put(signature, kernel,
                  shared=not isinstance(state, TrackedState) or state.asked)
    return kernel


def _tier_note(labels: list[str]) -> str:
    """Which compiled kernels a line's kernel may run once its plan switches (kernels/)."""
    return f"  | compiled: {comment(' or '.join(labels))}" if labels else ""


def _mark_safe(em: Emitter, step: Step) -> None:
    """A new array (no planned buffer) may leave the function; so may an array of a kernel
    that may return its inputs or views of them, when they all may."""
    inputs_safe = not step.spec.aliases or all(n in em.safe for n in step.inputs)
    for slot in step.spec.outputs:
        bufs = step.buffers.get(slot.name) or []
        for k, name in enumerate(step.op.outputs.get(slot.name, ())):
            buffered = k < len(bufs) and bufs[k] is not None
            if inputs_safe and not buffered:
                em.safe.add(name)
            else:
                em.safe.discard(name)
