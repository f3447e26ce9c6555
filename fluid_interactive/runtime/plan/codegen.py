"""Generating straight-line Python for an analysed block.

One line per kernel call, values bound to locals, persistable updates committed in one
``S.update`` at the end so a step that fails part way leaves the scope untouched::

    def train_step(S, x, y):
        v0, v1 = load_scope(S)  # every scope value the step reads, in one step
        v2 = k0(x, v0)       # prediction/fc_0.tmp_0:f32[256,1] = mul(X=x, Y=...)  # fit.py:21
        ...
        S.update({'prediction/fc_0.w_0': v9, ...})
        return v7.item()
"""
from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from ...ir.names import escape_unprintable
from ...ir.records import BlockDesc, ProgramDesc, VarDesc
from ...ir.text import format_op
from ...ops.apply import prepare_kernel
from ...ops.spec import Forward
from .analysis import BlockAnalysis
from .sources import compile_source, release_with, source_filename


@dataclass
class GeneratedCode:
    fn: Callable
    source: str
    filename: str
    line_to_op: dict[int, int]   # generated line -> op index in the block
    pool: list | None = None  # where a concurrently used instance goes back to
    work: int = 0   # elements a call touches (the thread policy's measure; runner.py)
    plan_state: dict = field(default_factory=dict)   # what its kernels share


def _py_name(name: str, used: set[str]) -> str:
    """A fresh ASCII identifier that recalls ``name`` (any text a program holds)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or base[0].isdigit() or keyword.iskeyword(base) or base.startswith("_"):
        base = "v_" + base
    candidate, k = base, 1
    while candidate in used:
        candidate = f"{base}_{k}"
        k += 1
    used.add(candidate)
    return candidate


class _Emitter:
    """Keeps the mapping from var names to Python locals while lines are emitted."""

    def __init__(self, reserved: set[str]):
        self.used = set(reserved)
        self.local: dict[str, str] = {}
        self.namespace: dict[str, Any] = {}
        self.lines: list[str] = []
        self.line_to_op: dict[int, int] = {}

    def bind(self, value: Any, prefix: str) -> str:
        name = _py_name(prefix, self.used)
        self.namespace[name] = value
        return name

    def fresh_local(self, var: str) -> str:
        name = _py_name(var, self.used)
        self.local[var] = name
        return name

    def emit(self, text: str, op_index: int | None = None) -> None:
        self.lines.append("    " + text)
        if op_index is not None:
            self.line_to_op[len(self.lines) + 1] = op_index  # +1 for the def line


def _return_expr(returns, analysis: BlockAnalysis, program: ProgramDesc, block: BlockDesc,
                 em: _Emitter, host: Callable[[str], str]) -> str:
    if returns is None:
        return "None"
    if isinstance(returns, tuple):
        inner = ", ".join(_return_expr(r, analysis, program, block, em, host) for r in returns)
        return f"({inner},)" if len(returns) == 1 else f"({inner})"
    if isinstance(returns, dict):
        inner = ", ".join(f"{k!r}: {_return_expr(v, analysis, program, block, em, host)}"
                          for k, v in returns.items())
        return "{" + inner + "}"
    var = program.find_var(block, returns)
    local = em.local[returns]
    if var is not None and not var.has_batch_dim and _size(analysis.types[returns].shape) == 1:
        return f"{local}.item()"
    return host(local)


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def generate(program: ProgramDesc, block: BlockDesc, analysis: BlockAnalysis,
             feed_names: list[str], xp: Any, rng_for: Callable[[int], Any],
             is_test: bool, tag: str,
             prologue: Callable[[Callable[[Any, str], str], dict], list[str]] | None = None
             ) -> GeneratedCode:
    """``prologue(bind, plan_state)``, called once the kernels are prepared, gives lines
    that run first in every call (the thread count, the kernel tier), using `bind` to
    name the values they need."""
    em = _Emitter({"S"})
    params = [em.fresh_local(n) for n in feed_names]
    for name, value in analysis.constants.items():
        em.local[name] = em.bind(value, "c_" + name)
    # Copy results that share memory with a buffer, a feed, a constant or the scope.
    owned = {n for s in analysis.steps if not s.spec.aliases for n in s.outputs}
    on_host = xp.__name__ == "numpy"

    def host(local: str) -> str:
        var = next(v for v, loc in em.local.items() if loc == local)
        if not on_host:
            return f"{local}.get()"
        return local if var in owned and var not in analysis.persistables else f"{local}.copy()"

    writes: dict[str, str] = {}
    plan_state: dict = {}   # what kernels of this plan share (see KernelContext.shared)
    _emit_scope_reads(em, _scope_reads(analysis, em.local))
    for step in analysis.steps:
        kernel = prepare_kernel(step.op, analysis.types.__getitem__, xp, step.buffers,
                                rng_for(step.index) if step.spec.random else None, is_test,
                                analysis.constants, plan_state)
        comment = _comment(format_op(step.op, lambda n: _typed(analysis, n)))
        if isinstance(kernel, Forward):  # the output is an input: bind, call nothing
            source_local = em.local[step.inputs[kernel.input_index]]
            em.emit(f"{em.fresh_local(step.outputs[0])} = {source_local}  # {comment}",
                    step.index)
        else:
            k = em.bind(kernel, f"k{step.index}_{step.op.type}")
            args = ", ".join(em.local[n] for n in step.inputs)
            outs = [em.fresh_local(n) for n in step.outputs]
            target = outs[0] if len(outs) == 1 else ", ".join(outs)
            em.emit(f"{target} = {k}({args})  # {comment}{_tier_note(kernel)}", step.index)
        if step.spec.inert(step.spec.full_attrs(step.op.attrs), is_test):
            continue  # its persistable outputs are its inputs: nothing to commit
        for name in step.outputs:
            if name in analysis.persistables:
                if step.spec.aliases:  # the scope must not keep a view into a temporary
                    em.emit(f"{em.local[name]} = {em.local[name]}.copy()")
                writes[name] = em.local[name]
    if prologue is not None:
        _put_first(em, prologue(em.bind, plan_state))
    if writes:
        em.emit("S.update({" + ", ".join(f"{k!r}: {v}" for k, v in writes.items()) + "})")
    em.emit("return " + _return_expr(block.returns, analysis, program, block, em, host))
    fn_name = _py_name(block.name or f"block{block.idx}", set())
    source = f"def {fn_name}(S, {', '.join(params)}):\n" + "\n".join(em.lines) + "\n"
    filename = source_filename(tag)
    namespace = compile_source(source, filename, dict(em.namespace))
    code = GeneratedCode(namespace[fn_name], source, filename, em.line_to_op,
                         plan_state=plan_state)
    release_with(code, filename)  # the text lives as long as the plan
    return code


def _put_first(em: _Emitter, lines: list[str]) -> None:
    """Lines that run first in the function; the op lines below them shift down."""
    em.lines[:0] = ["    " + line for line in lines]
    em.line_to_op = {k + len(lines): v for k, v in em.line_to_op.items()}


def _tier_note(kernel: Any) -> str:
    """Which compiled kernel a line's kernel runs once its plan switches (kernels/)."""
    label = getattr(kernel, "tier_label", None)
    return f"  | compiled: {_comment(label)}" if label else ""


def _scope_reads(analysis: BlockAnalysis, known: dict[str, str]) -> list[str]:
    """The scope's values the plan reads: inputs no earlier step (nor a feed or a
    constant) provides, and returned vars nothing computes."""
    have, reads = set(known), dict[str, None]()   # reads: an insertion-ordered set
    for step in analysis.steps:
        reads.update((n, None) for n in step.inputs if n not in have)
        have.update(step.outputs)
    reads.update((n, None) for n in analysis.returned if n not in have)
    return list(reads)


def _emit_scope_reads(em: _Emitter, names: list[str]) -> None:
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


def _comment(text: str) -> str:
    """Text for a ``# ...`` comment of generated code. Names and locations in it may come
    from a file: a line break in them would end the comment and run the rest, so every
    non-printable character is escaped (`format_op` does so already; this is the one gate
    all generated comments pass)."""
    return escape_unprintable(text)


def _typed(analysis: BlockAnalysis, name: str):
    t = analysis.types.get(name)
    return None if t is None else VarDesc(name, t.shape, t.dtype)

