"""Sub-blocks in generated code: each is planned once per input signature into a function
of its own, and the op owning it is written as a real Python ``while``/``if``/``for``
calling that function (its spec's `SubBlockRule.emit` writes the lines)::

    n5 = 0
    while cond:          # the condition read: the loop's one host read per iteration
        h, i, cond = b2_while(h, i, n, w, x)
        n5 += 1

    def b2_while(h, i, n, w, x):
        matmul_0_tmp_0 = k0_matmul(h, w)  # ...
        ...
        return h_1, i_1, cond_1

So neither planning nor the source grows with the trip count. A sub-block function takes
its feeds and the vars it reads of the blocks around, and gives back the vars it writes
(new arrays each run: nothing a later run writes), its returns and, when a gradient is
planned, the values it keeps, as one tuple per run. `SubPlans` caches the functions of a
runner, so planning the method again for new input shapes (a new sequence length) reuses
them when the body's own shapes did not change.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from types import FunctionType
from typing import Any

import numpy as np

from ...ir.blocks import declared_within, sub_block_index
from ...ir.records import BlockDesc, OpRole, returned_names
from ...ops.spec import BufferSlot, TensorType
from .analysis import Step, analyse_body, op_rng
from .emitter import Emitter, GeneratedCode, StepPlan, emit_kernel_step, py_name
from .sources import compile_source, release_with, source_filename
from .streams import RandomStreams

__all__ = ["SubPlans", "emit_steps", "generate_body"]


class SubPlans:
    """The sub-block functions of one runner, by block, input types and results. A plan
    built to run beside others (a pooled instance) gets its own: a function's buffers
    serve one call at a time. The plans that call a function hold it (their
    ``children``): it is dropped with the last of them, when the plan cache lets them go
    (a body planned per batch size would otherwise outlive its plans by thousands)."""

    def __init__(self, seed: int | None, streams: RandomStreams | None = None):
        self.seed, self.streams = seed, streams
        self.cache: weakref.WeakValueDictionary[tuple, GeneratedCode] = \
            weakref.WeakValueDictionary()

    def body(self, plan: StepPlan, sub: BlockDesc, inputs: list[tuple[str, TensorType]],
             results: list[str], kept: int | None, name: str,
             collect: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())) -> GeneratedCode:
        key = (sub.idx, tuple(inputs), tuple(results), kept, plan.is_test, collect)
        code = self.cache.get(key)
        if code is None:
            code = self.cache[key] = generate_body(plan, sub, inputs, results, kept, name,
                                                   collect)
        return code

    def rng_for(self, block: int) -> Callable[[int], Any]:
        if self.streams is not None:   # the method's generators (streams.py)
            return self.streams.rng_for(block)
        return lambda i: op_rng(self.seed, block, i, np)


def emit_steps(em: Emitter, plan: StepPlan,
               after: Callable[[Step], None] | None = None) -> None:
    """The lines of every step of ``plan``; ``after(step)`` runs after each."""
    needed = {n for s in plan.analysis.steps for n in s.inputs} | plan.analysis.returned
    for step in plan.analysis.steps:
        if step.spec.sub_block is None:
            emit_kernel_step(em, plan, step)
        else:
            _emit_owner(em, plan, step, needed)
        if after is not None:
            after(step)


def generate_body(plan: StepPlan, sub: BlockDesc, inputs: list[tuple[str, TensorType]],
                  results: list[str], kept: int | None, fn_name: str,
                  collect: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
                  ) -> GeneratedCode:
    """The function ``fn_name`` of sub-block ``sub``: parameters ``inputs``, returning the
    tuple of ``results``, the last ``kept`` of them as one tuple of their own (None: no
    such tuple), then, when ``collect`` names any, a tuple of the values of its own vars
    ``collect[0]`` and the lists gathered from its sub-blocks of ``collect[1]``."""
    direct, deeper = collect
    rng_for = plan.subplans.rng_for(sub.idx)
    analysis = analyse_body(plan.analysis.typing, sub, dict(inputs),
                            results + [n for n in direct if n not in results], plan.xp)
    em = Emitter(set())
    params = [em.fresh_local(n) for n, _ in inputs]
    em.safe.update(n for n, _ in inputs)   # never written: they may leave as they are
    for name, value in analysis.constants.items():
        em.local[name] = em.bind(value, "c_" + name)
        em.safe.add(name)
    body_plan = StepPlan(plan.program, sub, analysis, plan.xp, rng_for, plan.is_test,
                         plan.tag, plan.subplans, plan.plan_state, frozenset(deeper))
    emit_steps(em, body_plan)

    def leaving(n: str) -> str:
        return em.local[n] if n in em.safe else f"{em.local[n]}.copy()"
    values = [leaving(n) for n in results]
    if kept is not None:
        cut = len(values) - kept
        values = values[:cut] + [_tuple(values[cut:])]
    if direct or deeper:
        values.append(_tuple([leaving(n) for n in direct] +
                             [em.collected.get(n, "[]") for n in deeper]))
    em.emit("return (" + "".join(v + ", " for v in values) + ")")
    text = f"def {fn_name}({', '.join(params)}):\n" + "\n".join(em.lines) + "\n"
    return finish(em, text, fn_name, f"{plan.tag}.block{sub.idx}", sub.idx)


def _tuple(items: list[str]) -> str:
    return "(" + "".join(v + ", " for v in items) + ")"


def finish(em: Emitter, text: str, fn_name: str, tag: str, block: int,
           compiled: Compiled | None = None) -> GeneratedCode:
    """Compile ``text`` (the function ``fn_name``) into a `GeneratedCode` whose source
    shows the functions it calls below it. ``compiled`` keeps the texts compiled for the
    plans of one method: a plan for other shapes whose text is the same (the text names
    its kernels, not their shapes) runs that compiled code with its own kernels."""
    text = _released_on_failure(em, text)
    hit = compiled.get(text) if compiled is not None else None
    if hit is None:
        filename = source_filename(tag)
        # the function leaves its namespace (its globals): a function in its own globals
        # is a reference cycle, which would keep its kernels and their scratch after the
        # plan cache dropped the plan, until the next full collection
        fn = compile_source(text, filename, dict(em.namespace)).pop(fn_name)
        if compiled is not None:
            compiled[text] = (filename, fn.__code__)
            release_with(compiled, filename)   # the text lives as long as the method's
    else:
        filename, fn_code = hit
        fn = FunctionType(fn_code, dict(em.namespace), fn_name)
    source = "\n\n".join([text.rstrip("\n"), *em.sources.values()]) + "\n"
    code = GeneratedCode(fn, source, filename, em.line_to_op,
                         block=block, children=dict(em.children), counters=em.counters,
                         text=text)
    if compiled is None:
        release_with(code, filename)   # the text lives as long as the plan
    return code


def _released_on_failure(em: Emitter, text: str) -> str:
    """``text`` with its body in ``try:``, when it runs a loop: a call that fails or is
    interrupted (Ctrl-C) empties the lists of values kept per run (a guard's frame in the
    traceback may hold one too) and drops every local but the run counters (which its
    error reads) before the exception leaves, so that the traceback (IPython keeps the
    last one) holds none of them. Free when nothing is raised."""
    if not em.counters and not em.runs:
        return text
    counters = set(em.counters.values())
    names = sorted(n for n in em.real if n not in counters)
    header, body = text.split("\n", 1)
    lines = ["    try:", *("    " + line for line in body.rstrip("\n").split("\n")),
             "    except BaseException:   # drop what the loops kept: see loops.py"]
    if em.runs:   # (a list not made yet is no local yet: hence the frame's locals)
        empty, here = em.bind(_empty_runs, "empty_runs"), em.bind(locals, "frame_locals")
        lines.append(f"        {empty}({here}(), {tuple(em.runs)!r})")
    lines += ["        " + " = ".join(names[i:i + 8]) + " = None"
              for i in range(0, len(names), 8)]
    lines.append("        raise")
    em.line_to_op = {k + 1 if k > 1 else k: v for k, v in em.line_to_op.items()}
    return header + "\n" + "\n".join(lines) + "\n"


def _empty_runs(frame: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        runs = frame.get(name)
        if runs is not None:
            runs.clear()


class Compiled(dict):
    """text -> (file name, code object) of the generated functions of one method's plans
    (a dict that a weak reference may follow)."""


def _ensure_local(em: Emitter, var: str, index: int) -> str:
    """A Python local (not a namespace constant) holding ``var``, so that a loop may
    rebind it; None when nothing wrote it yet (a branch that may not run)."""
    current = em.local.get(var)
    if current is not None and current in em.real:
        return current
    local = em.fresh_local(var)
    em.emit(f"{local} = {current if current is not None else 'None'}", index)
    if current is None:
        em.safe.add(var)   # a run's results are new arrays; a constant stays what it was
    return local


def _emit_owner(em: Emitter, plan: StepPlan, step: Step, needed: set[str]) -> None:
    rule = step.spec.sub_block
    assert rule is not None
    op = step.op
    sub = plan.program.blocks[sub_block_index(op)]   # type: ignore[index]
    keep = _kept_names(plan, step, needed)
    typing = plan.analysis.typing
    feeds = typing.feeds.get(id(op), {})
    reads = rule.body_inputs(op)
    inputs = [(n, feeds[n]) for n in sub.feeds] + [(n, plan.analysis.types[n]) for n in reads]
    results = rule.body_outputs(op) + returned_names(sub.returns) + (keep or [])
    name = py_name(f"b{sub.idx}_{op.type}", set(em.used))
    inner = declared_within(plan.program, sub)
    mine = [n for n in sorted(plan.collect) if n in inner]
    if op.role & OpRole.BACKWARD:   # a gradient block replays forward values: the forward
        mine = [n for n in mine if n not in em.collected]   # loop's runs are the values
    direct = tuple(n for n in mine if n in sub.vars)
    deeper = tuple(n for n in mine if n not in sub.vars)
    body = plan.subplans.body(plan, sub, inputs, results, None if keep is None else len(keep),
                              name, (direct, deeper))
    fn = em.bind(body.fn, name)
    for n in mine:
        if n not in em.collected:
            em.collected[n] = em.fresh(f"seen_{n}")
            em.runs.append(em.collected[n])
            em.emit(f"{em.collected[n]} = []", step.index)
    em.children[body.filename] = body
    em.children.update(body.children)
    em.sources.setdefault(body.filename, body.text)
    for filename, child in body.children.items():
        em.sources.setdefault(filename, child.text)
    em.emit(f"# {plan.describe(step)}", step.index)
    writes = [_ensure_local(em, n, step.index) for n in rule.body_outputs(op)]
    for slot in rule.stacked:   # arrays the op fills step by step
        bufs = step.buffers.get(slot) or []
        for i, name in enumerate(op.output(slot)):
            em.fresh_local(name)
            if i < len(bufs) and bufs[i] is not None:
                em.safe.discard(name)
            else:
                em.safe.add(name)
    kept_local = None
    if keep is not None:   # one tuple per run, even an empty one: the runs are counted
        kept_local = em.fresh_local(op.output(rule.keeps)[0])
        em.runs.append(kept_local)
        em.emit(f"{kept_local} = []", step.index)
    gathered = [(em.collected[n], n in direct) for n in mine]
    rule.emit(_LoopEmit(em, plan, step, fn, sub, writes, kept_local, gathered))
    if op.role & OpRole.BACKWARD:   # replayed newest first: put them in iteration order
        for local, _ in gathered:
            em.emit(f"{local}.reverse()", step.index)


def _kept_names(plan: StepPlan, step: Step, needed: set[str]) -> list[str] | None:
    """What the op keeps per run: its ``keep`` attr, when its kept runs are read later
    in this plan (a gradient is planned) and it is not in inference mode; None when it
    keeps nothing, not even the count of its runs."""
    rule = step.spec.sub_block
    attrs = step.spec.full_attrs(step.op.attrs)
    if rule is None or not rule.keeps or attrs.get("is_test"):
        return None
    kept = step.op.output(rule.keeps)
    if not kept or kept[0] not in needed:
        return None
    return list(attrs.get("keep") or [])


class _LoopEmit:
    """The `EmitContext` of one op owning a sub-block."""

    def __init__(self, em: Emitter, plan: StepPlan, step: Step, fn: str, sub: BlockDesc,
                 writes: list[str], kept: str | None, gathered: list[tuple[str, bool]]):
        self.em, self.plan, self.step, self.fn, self.sub = em, plan, step, fn, sub
        self.op = step.op
        self.attrs: Mapping[str, Any] = step.spec.full_attrs(step.op.attrs)
        self._writes, self._kept, self._gathered = writes, kept, gathered

    def local(self, var: str) -> str:
        return self.em.local[var]

    def fresh(self, hint: str) -> str:
        return self.em.fresh(hint)

    def line(self, text: str) -> None:
        self.em.emit(text, self.step.index)

    def counter(self) -> str:
        name = self.em.fresh(f"run{self.step.index}")
        self.em.counters[self.step.index] = name
        return name

    def bind(self, value: Any, hint: str) -> str:
        return self.em.bind(value, hint)

    def kept(self) -> str | None:
        return self._kept

    def type(self, var: str) -> TensorType:
        return self.plan.analysis.types[var]

    def run_body(self, feeds: Sequence[str] = (), returns: Sequence[str] = (),
                 indent: int = 1, count: str | None = None) -> None:
        pad = "    " * indent
        rule = self.step.spec.sub_block
        reads = [self.em.local[n] for n in rule.body_inputs(self.op)]   # type: ignore[union-attr]
        call = f"{self.fn}({', '.join([*feeds, *reads])})"
        targets = [*self._writes, *returns]
        kept = self.em.fresh("kept") if self._kept else None
        if kept:
            targets.append(kept)
        seen = self.em.fresh("seen") if self._gathered else None
        if seen:
            targets.append(seen)
        self.line(pad + ("".join(t + ", " for t in targets) + "= " if targets else "") + call)
        if kept:
            self.line(f"{pad}{self._kept}.append({kept})")
        for k, (local, direct) in enumerate(self._gathered):   # values of each run
            self.line(f"{pad}{local}.{'append' if direct else 'extend'}({seen}[{k}])")
        if count:
            self.line(f"{pad}{count} += 1")

    def replayed(self, kept: str) -> list[str]:
        """``kept[i]`` for each kept value; None for one read for its shape alone."""
        runs = self.op.input(self.step.spec.sub_block.replays)[0]  # type: ignore[union-attr]
        order = list(self.plan.analysis.typing.kept.get(runs, {}))
        shapes = self.plan.analysis.typing.shapes.get(runs, {})
        return [f"{kept}[{order.index(n)}]" if n in order else "None"
                for n in self.sub.feeds if n in order or n in shapes]

    def output_array(self, slot: str, i: int, leading: str) -> str:
        """The planned buffer of a stacked output, or a new array of the right shape."""
        bufs = self.step.buffers.get(slot) or []
        buf = bufs[i] if i < len(bufs) else None
        if isinstance(buf, BufferSlot):
            return self.em.bind(buf.materialize(), f"buf_{self.op.output(slot)[i]}")
        t = self.plan.analysis.types[self.op.output(slot)[i]]
        empty = self.em.bind(self.plan.xp.empty, "empty")
        return f"{empty}(({leading},) + {tuple(t.shape[1:])!r}, {t.dtype!r})"
