"""Running one block: a plan per feed signature, built once into a `Plan` record
(record.py) and kept in a bounded cache (cache.py), and errors that name the failing op
and the user's line (failures.py)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import FluidError, KernelError
from ...ir.records import BlockDesc, OpRole, ProgramDesc
from ...kernels import PlanTier
from ...ops.apply import prepare_kernel
from ...ops.plan_state import PlanState
from ...ops.row_journal import RowJournal
from ...ops.spec import Forward, TensorType
from ...passes.pipeline import plan_passes
from ...util.gc_pause import gc_paused
from .analysis import BlockMemo, analyse_block, op_rng
from .buffers import PlanMemory
from .cache import Lane, PlanCache, SignatureKey
from .codegen import generate
from .failures import FailureSite
from .family import Family, PlanFamily, TrackedState, family_key, report
from .feed import check_batch_sizes
from .loops import Compiled, SubPlans
from .record import Plan, assemble
from .streams import RandomStreams


class BlockRunner:
    """Compiles ``block`` lazily for each distinct feed signature and runs it on a scope."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, xp: Any,
                 seed: int | None, rng_for: Callable[[int], Any] | None = None,
                 is_test: bool | None = None, streams: RandomStreams | None = None):
        self.program, self.block, self.xp, self.seed = program, block, xp, seed
        # The block as plans run it: after the plan passes (fusion; passes/pipeline.py).
        self.plan_block = plan_passes(program, block)
        self.site = FailureSite(program, block, self.plan_block)
        self.feed_names = list(block.feeds)
        # Random ops draw from ``streams`` (one generator per op for every plan of the
        # block) when given, else from a generator per op and plan.
        self.streams = streams
        base_rng = rng_for or (streams.rng_for(block.idx) if streams is not None
                               else lambda i: op_rng(seed, block.idx, i, np))
        # Random draws stay keyed by an op's index in the block as written, so that fusing
        # the ops around a random op never changes what it draws.
        origin = {id(op): i for i, op in enumerate(block.ops)}
        at = [origin.get(id(op), i) for i, op in enumerate(self.plan_block.ops)]
        self._rng_for = lambda i: base_rng(at[i] if i >= 0 else i)
        self.is_test = is_test if is_test is not None else not _optimizes(block)
        # One plan per feed signature, for callers that take turns (under a lock).
        self.plans: dict[SignatureKey, Plan] = {}
        self.cache = PlanCache(self.plans)
        # The functions of sub-blocks (loop bodies), shared by the plans taking turns.
        self.subplans = SubPlans(seed, streams)
        # What the plans of every shape share: the memory of their buffers, and the
        # generated texts compiled, whose code a plan of other shapes runs with its own
        # kernels (buffers.PlanMemory, loops.finish).
        self.memory = PlanMemory(xp)
        self.compiled = Compiled()
        # Lanes free for callers that run concurrently (a method that changes nothing):
        # each call takes one, and a lane's plans share its memory; the first lane is
        # the plans above, so that one caller at a time takes one memory for all shapes.
        self.lanes = [Lane(self.plans, self.cache, self.memory, self.subplans)]
        # The rows its plans' sparse updates overwrite in place in one call, to put back if
        # the call fails and for the history (ops/row_journal.py). Calls that write state
        # take turns, so one journal serves every plan of the block.
        self.journal = RowJournal()
        self.declared = [tuple(program.var(block, n).shape) for n in self.feed_names]
        # what its plans for every size share: shape rules' answers, the ops that run
        self.memo = BlockMemo()

    def plan(self, arrays: list[Any]) -> Plan:
        """The plan for these arrays' shapes, built on first use. Callers must take turns
        (a plan's buffers and kernel state serve one call at a time)."""
        return self.plan_in(self.lanes[0], arrays)

    def lane(self) -> Lane:
        """A new lane, for a call that runs beside the calls holding the others."""
        return Lane({}, None, PlanMemory(self.xp), SubPlans(self.seed, self.streams))

    def plan_in(self, lane: Lane, arrays: list[Any]) -> Plan:
        """The plan of ``lane`` for these arrays' shapes, built on first use (the caller
        holds the lane: its plans run one call at a time)."""
        key = tuple(a.shape for a in arrays)
        plan = lane.plans.get(key)
        if plan is None:
            plan = self._build(arrays, lane)
        return plan

    def _build(self, arrays: list[Any], lane: Lane) -> Plan:
        """A new plan for these arrays' shapes, kept in ``lane``'s cache; the time it took,
        keeping it included, recorded by its family."""
        key = family_key(self.declared, tuple(tuple(a.shape) for a in arrays))
        family = lane.families.get(key)
        if family is None:   # kept once its first plan is built
            family = Family(key, self._declared_vars())
        started = time.perf_counter()
        # a build that fails part way leaves the lane as it was: the memory blocks it grew
        # and the kernels it kept go, and a family it started is not kept
        saved = lane.memory.checkpoint()
        try:
            with gc_paused():   # many records and kernels: keep planning linear in size
                plan = self._build_plan(arrays, lane.subplans, lane.memory, family)
        except BaseException as e:
            lane.memory.restore(saved)
            family.kernels.undo()
            if isinstance(e, MemoryError):
                raise self._out_of_memory(arrays) from None
            raise
        family.kernels.commit()
        lane.families[key] = family   # the plan of every size alike (family.py)
        stale = lane.memory.replaced()   # plans holding blocks since replaced: plan anew
        if stale:
            lane.cache.forget(lambda other: bool(other.memory_keys & stale))
            for other in lane.families.values():
                other.kernels.forget(stale)
        lane.cache.add(tuple(a.shape for a in arrays), plan)
        family.timed((time.perf_counter() - started) * 1e3)
        return plan

    def _out_of_memory(self, arrays: list[Any]) -> KernelError:
        shapes = ", ".join(f"{n}: {list(a.shape)}" for n, a in zip(self.feed_names, arrays))
        return KernelError(
            f"{self.block.name or 'block'}: out of memory while planning for inputs "
            f"({shapes}); the plan's buffers do not fit. Call it with smaller batches, "
            f"or free memory (fluid.plan_cache(memory=...) bounds what kept plans "
            f"hold). No state was changed.")

    def _build_plan(self, arrays: list[Any], subplans: SubPlans, memory: PlanMemory,
                    family: Family) -> Plan:
        check_batch_sizes(self.block, self.feed_names, arrays)
        feed_types = {n: TensorType(tuple(a.shape), a.dtype.name)
                      for n, a in zip(self.feed_names, arrays)}
        analysis = analyse_block(self.program, self.plan_block, feed_types, self.xp,
                                 memory=memory, memo=self.memo)
        state = TrackedState()   # kernels that share state serve one size
        state.journal = self.journal
        state.scratch = family.scratch
        state.every_size = family.every_size
        code = generate(self.program, self.plan_block, analysis, self.feed_names, self.xp,
                        self._rng_for, self.is_test, self._tag(), state, subplans,
                        prologue=_tier_switch, compiled=self.compiled,
                        reuse=family.kernels)
        family.note(tuple(tuple(a.shape) for a in arrays), analysis)
        plan = assemble(code, state, analysis, memory, on_host=self.xp is np)
        family.start_threads(plan.fn)   # a new size starts where the family's last one is
        return plan

    def _tag(self) -> str:
        return f"{self.program.name}.{self.block.name or self.block.idx}"

    def families(self) -> list[PlanFamily]:
        """The plans kept now, one per family of feed shapes (family.py): per signature
        of feed ranks, dtypes and the dims declared (a dim declared -1, a batch or a time
        dim, is any size), the concrete shapes prepared, and which ops' kernels are
        prepared per size and why."""
        found: list[PlanFamily] = []
        # copies of what callers running beside this may change meanwhile
        for lane in list(self.lanes):
            for key, family in list(lane.families.items()):
                shapes = [k for k in list(lane.plans) if family_key(self.declared, k) == key]
                files = {lane.plans[k].code.filename for k in shapes}
                found.append(report(family, shapes, len(files)))
        return found

    def _declared_vars(self) -> dict[str, tuple[int, ...]]:
        """Every var of the planned block by its declared shape (-1: unknown until it
        runs)."""
        names = {n for op in self.plan_block.ops for n in op.input_names() + op.output_names()}
        return {n: _declared_shape(self.program, self.plan_block, n) for n in names}

    @property
    def tier(self) -> str:
        """Which kernels the latest plan runs: 'numpy', 'compiling' or 'loading' (NumPy
        meanwhile), or 'compiled' (docs/architecture.md, "The compiled tier")."""
        tier = self.plan_tier()
        return "numpy" if tier is None else tier.describe()

    def plan_tier(self, plan: Plan | None = None) -> PlanTier | None:
        """The compiled-kernel tier of ``plan`` (default: the latest), if it has any."""
        if plan is None:
            if not self.plans:
                return None
            plan = list(self.plans.values())[-1]
        return plan.tier

    def run(self, scope_values: dict, arrays: list[Any]) -> Any:
        plan = self.plans.get(tuple(a.shape for a in arrays)) or self.plan(arrays)
        try:
            result = plan.fn(scope_values, *arrays)
        except BaseException as e:
            self.journal.rollback()   # rows a sparse update wrote go back
            if isinstance(e, FluidError) or not isinstance(e, Exception):
                raise
            raise self.kernel_error(e, plan) from e
        self.journal.clear()
        return result

    def run_once(self, scope_values: dict) -> None:
        """Run a block that takes no feeds and runs once (block 0's initialisers) without
        generating code for it: each kernel is prepared and called in turn, and the
        persistable values are committed together at the end, as a plan would."""
        analysis = analyse_block(self.program, self.plan_block, {}, self.xp)
        env = dict(analysis.constants)
        state = PlanState()
        for step in analysis.steps:
            try:
                kernel = prepare_kernel(step.op, analysis.types.__getitem__, self.xp,
                                        step.buffers, self._rng_for(step.index)
                                        if step.spec.random else None, self.is_test,
                                        analysis.constants, state)
                args = [env[n] if n in env else scope_values[n] for n in step.inputs]
                result = args[kernel.input_index] if isinstance(kernel, Forward) \
                    else kernel(*args)
            except FluidError:
                raise
            except Exception as e:
                raise self.op_error(e, step.index) from e
            env.update(zip(step.outputs, (result,) if len(step.outputs) == 1 else result))
        scope_values.update({n: v for n, v in env.items() if n in analysis.persistables})

    def kernel_error(self, error: Exception, plan: Plan | None) -> KernelError:
        """The error of a call of ``plan`` (None: it failed before one was built)."""
        return self.site.kernel_error(error, None if plan is None else plan.code)

    def op_error(self, error: Exception, index: int | None) -> KernelError:
        """The error of op ``index`` of the block (None: no op known) failing."""
        return self.site.op_error(error, index)


def _declared_shape(program: ProgramDesc, block: BlockDesc, name: str) -> tuple[int, ...]:
    var = program.find_var(block, name)
    return tuple(var.shape) if var is not None else ()


def _tier_switch(bind: Callable[[Any, str], str], state: PlanState) -> list[str]:
    """The line a plan runs first while its compiled kernels are being built: the switch
    to them once they are (between calls, never in one)."""
    tier = state.tier
    tier.start()   # compiled kernels: loaded now, or built meanwhile
    if not tier.pending:
        return []
    k = bind(tier, "tier")
    return [f"if {k}.pending: {k}.poll()   # switch to compiled kernels"]


def _optimizes(block: BlockDesc) -> bool:
    return any(op.role & OpRole.OPTIMIZE for op in block.ops)
