"""Generating straight-line Python for an analysed method block.

One line per kernel call, values bound to locals, persistable updates committed in one
``S.update`` at the end so a step that fails part way leaves the scope untouched::

    def train_step(S, x, y):
        v0, v1 = load_scope(S)  # every scope value the step reads, in one step
        v2 = k0(x, v0)       # prediction/fc_0.tmp_0:f32[?,1] = mul(X=x, Y=...)  # fit.py:21
        ...
        S.update({'prediction/fc_0.w_0': v9, ...})
        return v7.item()

Comments show each op's text line with its declared types, so the source reads the same
for every feed signature. An op owning a sub-block is a real Python loop or branch
calling the sub-block's own function (`loops`), whose text follows the method's.
"""
from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from ...backend import to_host
from ...ir.records import BlockDesc, ProgramDesc, map_returns, returns_source
from ...ops.plan_state import PlanState
from ...ops.row_journal import rows_written
from .analysis import BlockAnalysis, Step
from .emitter import Emitter, GeneratedCode, StepPlan, py_name
from .family import KernelReuse
from .loops import Compiled, SubPlans, emit_steps, finish

__all__ = ["GeneratedCode", "generate"]


def _return_expr(returns, analysis: BlockAnalysis, program: ProgramDesc, block: BlockDesc,
                 em: Emitter, host: Callable[[str], str], xp: Any = np) -> str:
    return returns_source(map_returns(
        returns, lambda name: _returned_value(name, analysis, program, block, em, host, xp)))


def _returned_value(returns: str, analysis: BlockAnalysis, program: ProgramDesc,
                    block: BlockDesc, em: Emitter, host: Callable[[str], str], xp: Any) -> str:
    """The expression a plan returns for one returned var."""
    if returns in analysis.collected:   # a var of a loop's body: its value of every run
        stack = em.bind(_stacker(xp), "stack_runs")
        return f"{stack}({em.collected.get(returns, '[]')})"
    var = program.var(block, returns)
    if not var.has_batch_dim and _size(analysis.types[returns].shape) == 1:
        return f"{em.local[returns]}.item()"
    return host(returns)


def _stacker(xp: Any) -> Callable[[list], Any]:
    """``stack(values)``: the values a var had in each run of its block, stacked along a
    new first dim, as a host array (an empty array for no run)."""
    def stack(values: list) -> Any:
        return to_host(xp.stack(values)) if values else np.empty((0,))
    return stack


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def generate(program: ProgramDesc, block: BlockDesc, analysis: BlockAnalysis,
             feed_names: list[str], xp: Any, rng_for: Callable[[int], Any],
             is_test: bool, tag: str, state: PlanState, subplans: SubPlans | None = None,
             prologue: Callable[[Callable[[Any, str], str], PlanState], list[str]] | None = None,
             compiled: Compiled | None = None, reuse: KernelReuse | None = None
             ) -> GeneratedCode:
    """The plan's function, its kernels prepared with ``state`` (what they share).
    ``prologue(bind, state)``, called once the kernels are prepared, gives lines that run
    first in every call (the kernel tier's switch), using ``bind`` to name the values they
    need. ``compiled``: the texts compiled for the method's other plans (loops.finish);
    ``reuse``: the kernels that serve every size of the plan's family."""
    em = Emitter({"S"})
    params = [em.fresh_local(n) for n in feed_names]
    for name, value in analysis.constants.items():
        em.local[name] = em.bind(value, "c_" + name)
    on_host = xp.__name__ == "numpy"

    def host(var: str) -> str:
        local = em.local[var]
        if not on_host:
            return f"{local}.get()"
        # a result shares no memory with a buffer, a feed, a constant or the scope
        fresh = var in em.safe and var not in analysis.persistables
        return local if fresh else f"{local}.copy()"

    plan = StepPlan(program, block, analysis, xp, rng_for, is_test, tag,
                    subplans or SubPlans(None), plan_state=state,
                    collect=frozenset(analysis.collected), reuse=reuse)
    writes: dict[str, str] = {}
    _emit_scope_reads(em, _scope_reads(analysis, em.local))
    emit_steps(em, plan, lambda step: _collect_writes(em, step, analysis, is_test, writes))
    if prologue is not None:
        _put_first(em, prologue(em.bind, state))
    journal = state.journal
    if journal is not None and _writes_rows(analysis):
        # a call starts with an empty journal of rows written in place (its caller takes
        # them, or puts them back if the call fails)
        _put_first(em, [f"{em.bind(journal.clear, 'start_row_journal')}()"])
    if writes:
        em.emit("S.update({" + ", ".join(f"{k!r}: {v}" for k, v in writes.items()) + "})")
    em.emit("return " + _return_expr(block.returns, analysis, program, block, em, host, xp))
    fn_name = py_name(block.name or f"block{block.idx}", set())
    text = f"def {fn_name}(S, {', '.join(params)}):\n" + "\n".join(em.lines) + "\n"
    return finish(em, text, fn_name, tag, block.idx, compiled)


def _writes_rows(analysis: BlockAnalysis) -> bool:
    """Whether a step of the plan writes a var by rows in place (`OpSpec.row_writes`)."""
    def kind_of(name: str) -> str:
        return analysis.types[name].kind
    return any(rows_written(step.op, step.spec.row_writes,
                            step.spec.full_attrs(step.op.attrs), kind_of)
               for step in analysis.steps)


def _put_first(em: Emitter, lines: list[str]) -> None:
    """Lines that run first in the function; the op lines below them shift down."""
    em.lines[:0] = ["    " + line for line in lines]
    em.line_to_op = {k + len(lines): v for k, v in em.line_to_op.items()}


def _collect_writes(em: Emitter, step: Step, analysis: BlockAnalysis, is_test: bool,
                    writes: dict[str, str]) -> None:
    """Persistable outputs of ``step`` go into the final ``S.update``."""
    if step.spec.inert(step.spec.full_attrs(step.op.attrs), is_test):
        return   # its persistable outputs are its inputs: nothing to commit
    for name in step.outputs:
        if name in analysis.persistables:
            if step.spec.aliases and step.spec.sub_block is None:
                # the scope must not keep a view into a temporary
                em.emit(f"{em.local[name]} = {em.local[name]}.copy()")
            writes[name] = em.local[name]


def _scope_reads(analysis: BlockAnalysis, known: dict[str, str]) -> list[str]:
    """The scope's values the plan reads: inputs no earlier step (nor a feed or a
    constant) provides, and returned vars nothing computes."""
    have = set(known) | analysis.collected
    reads: dict[str, None] = {}   # an insertion-ordered set
    for step in analysis.steps:
        reads.update((n, None) for n in step.inputs if n not in have)
        have.update(step.outputs)
    reads.update((n, None) for n in analysis.returned if n not in have)
    return list(reads)


def _emit_scope_reads(em: Emitter, names: list[str]) -> None:
    """Read every value the plan needs from the scope in one step, at the top: a commit of
    another thread's step (one ``S.update``) then lands wholly before or wholly after it,
    so a call never mixes parameters of two steps."""
    if not names:
        return
    locals_ = [em.fresh_local(n) for n in names]
    if len(names) == 1:
        em.emit(f"{locals_[0]} = S[{names[0]!r}]")
        return
    load = em.bind(itemgetter(*names), "load_scope")
    em.emit(f"{', '.join(locals_)} = {load}(S)")
