"""Running one block: a plan per feed signature, built once and kept in a bounded cache,
and errors that name the failing op and the user's line."""
from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ...backend import threads
from ...errors import FluidError, KernelError
from ...ir.records import BlockDesc, OpRole, ProgramDesc
from ...ir.source import format_location
from ...kernels import TIER_KEY, PlanTier, enabled
from ...ops.apply import prepare_kernel
from ...ops.flat_state import lend_key, state_key
from ...ops.registry import get_spec
from ...ops.spec import Forward, TensorType
from ...passes.pipeline import plan_passes
from ...util.gc_pause import gc_paused
from .analysis import BlockAnalysis, analyse_block, describe_op, op_rng
from .buffers import PlanMemory, lent_arenas, over_arenas
from .codegen import GeneratedCode, generate
from .feed import check_batch_sizes
from .loops import Compiled, SubPlans
from .streams import RandomStreams
from .turns import Turns

SignatureKey = tuple


class BlockRunner:
    """Compiles ``block`` lazily for each distinct feed signature and runs it on a scope."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, xp: Any,
                 seed: int | None, rng_for: Callable[[int], Any] | None = None,
                 is_test: bool | None = None, streams: RandomStreams | None = None):
        self.program, self.block, self.xp, self.seed = program, block, xp, seed
        # The block as plans run it: after the plan passes (fusion; passes/pipeline.py).
        self.plan_block = plan_passes(program, block)
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
        self.plans: dict[SignatureKey, GeneratedCode] = {}
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
        self.declared = [tuple(program.var(block, n).shape) for n in self.feed_names]

    def plan(self, arrays: list[Any]) -> GeneratedCode:
        """The plan for these arrays' shapes, built on first use. Callers must take turns
        (a plan's buffers and kernel state serve one call at a time)."""
        key = tuple(a.shape for a in arrays)
        code = self.plans.get(key)
        if code is None:
            code = self._build(arrays, memory=self.memory, cache=self.cache)
            self.cache.add(key, code)
        return code

    def lane(self) -> Lane:
        """A new lane, for a call that runs beside the calls holding the others."""
        return Lane({}, None, PlanMemory(self.xp), SubPlans(self.seed, self.streams))

    def plan_in(self, lane: Lane, arrays: list[Any]) -> GeneratedCode:
        """The plan of ``lane`` for these arrays' shapes, built on first use (the caller
        holds the lane: its plans run one call at a time)."""
        key = tuple(a.shape for a in arrays)
        code = lane.plans.get(key)
        if code is None:
            code = self._build(arrays, lane.subplans, False, lane.memory, lane.cache)
            lane.cache.add(key, code)
        return code

    def _build(self, arrays: list[Any], subplans: SubPlans | None = None,
               turns: bool = True, memory: PlanMemory | None = None,
               cache: PlanCache | None = None) -> GeneratedCode:
        try:
            with gc_paused():   # many records and kernels: keep planning linear in size
                code = self._build_plan(arrays, subplans or self.subplans, turns, memory)
        except MemoryError:
            shapes = ", ".join(f"{n}: {list(a.shape)}" for n, a in zip(self.feed_names, arrays))
            raise KernelError(
                f"{self.block.name or 'block'}: out of memory while planning for inputs "
                f"({shapes}); the plan's buffers do not fit. Call it with smaller batches, "
                f"or free memory (fluid.plan_cache(memory=...) bounds what kept plans "
                f"hold). No state was changed.") from None
        if memory is not None and cache is not None:
            stale = memory.replaced()   # plans holding blocks since replaced: plan anew
            if stale:
                cache.forget(lambda other: bool(other.memory_keys & stale))
        return code

    def _build_plan(self, arrays: list[Any], subplans: SubPlans, turns: bool,
                    memory: PlanMemory | None) -> GeneratedCode:
        check_batch_sizes(self.block, self.feed_names, arrays)
        feed_types = {n: TensorType(tuple(a.shape), a.dtype.name)
                      for n, a in zip(self.feed_names, arrays)}
        analysis = analyse_block(self.program, self.plan_block, feed_types, self.xp,
                                 self._rng_for, memory=memory)
        work = plan_work(analysis)
        on_host = self.xp is np   # on a device the host's BLAS is not the step's
        small = threads.is_small(work)
        if small and on_host:   # the count between calls (a large plan puts it back)
            threads.STATE.use(threads.STATE.small)
        nbytes = buffer_bytes(analysis.steps)
        code = self._taking_turns(analysis, subplans, nbytes) if turns and on_host else None
        if code is None:
            code = self._generate(analysis, subplans)
        # the method's memory is not the plan's: keeping the plan costs its own buffers,
        # or the arrays its kernels made for themselves (a convolution's columns), weighed
        # once it ran (kernels may make them in their first call: PlanCache.add)
        code.nbytes = nbytes
        if memory is not None:
            fn, state = code.fn, code.plan_state
            code.nbytes, code.weigh = 0, lambda: kernel_bytes((fn, state), memory)
        code.memory_keys = analysis.slots.keys() if analysis.slots is not None else set()
        code.work = work
        tier = self.plan_tier(code)
        if tier is not None and not (tier.pending or tier.ready):
            tier = None   # no compiled kernel to measure (none asked for, or the tier off)
        if on_host and (not small or tier is not None):
            # the faster of one thread and all cores (a small plan: one thread), and of
            # its compiled kernels and its NumPy ones, measured as it runs
            code.fn = adaptive = threads.AdaptiveThreads(code.fn, tier,
                                                         (1,) if small else None)
            if tier is not None and tier.pending:   # measured again once they are loaded
                tier.on_switch.append(adaptive.kernels_changed)
        return code

    def _generate(self, analysis: BlockAnalysis, subplans: SubPlans,
                  plan_state: dict | None = None,
                  rng_for: Callable[[int], Any] | None = None) -> GeneratedCode:
        return generate(self.program, self.plan_block, analysis, self.feed_names, self.xp,
                        rng_for or self._rng_for, self.is_test,
                        tag=f"{self.program.name}.{self.block.name or self.block.idx}",
                        subplans=subplans, prologue=_tier_switch, plan_state=plan_state,
                        compiled=self.compiled)

    def _taking_turns(self, analysis: BlockAnalysis, subplans: SubPlans, nbytes: int
                      ) -> GeneratedCode | None:
        """The plan as instances taking turns (turns.py) when a fused update may write its
        parameters over a gradient arena worth the trouble, else None. The first instance
        is the plan: its source, its errors' lines; the others are its children. ``nbytes``:
        what the plan's buffers hold (`buffer_bytes`)."""
        if analysis.collected:   # values of sub-block runs, stacked when the call ends:
            return None          # one may be a view of a gradient, read after the update
        arenas = over_arenas(analysis.steps, analysis.returned | analysis.persistables)
        lent_bytes = sum(_slot_bytes(arena) for _, arena in arenas)
        # A second instance saves the arenas and costs the scratch its kernels make for
        # themselves, which grows with the other buffers (a convolution's or a pooling's
        # scratch is the size of its images): lent where the arenas outweigh those.
        others = nbytes - lent_bytes
        if not arenas or not enabled() or lent_bytes < max(LEND_MIN_BYTES, others):
            return None
        make = _Instances(lambda state, rng_for: self._generate(analysis, subplans, state,
                                                                rng_for),
                          self._rng_for, self.xp, analysis.steps, arenas)
        code, gens = make(True)
        if not gens:
            return code
        code.fn = Turns(make, (code, gens))
        return code

    def families(self) -> list[PlanFamily]:
        """The plans kept now, by the shapes they serve: per signature of feed ranks,
        dtypes and the dims declared (a dim declared -1, a batch or a time dim, is any
        size), which concrete shapes have kernels prepared, and which ops need them."""
        groups: dict[tuple, list[tuple]] = {}
        for key in [*self.plans, *(k for lane in self.lanes[1:] for k in lane.plans)]:
            groups.setdefault(self._family(key), []).append(key)
        per_size = self._per_size()
        files = {k: getattr(self._code(k), "filename", None) for key in groups.values()
                 for k in key}
        return [PlanFamily(family, tuple(dict.fromkeys(keys)), per_size,
                           len({files[k] for k in keys} - {None}))
                for family, keys in groups.items()]

    def _family(self, key: tuple) -> tuple:
        return tuple(tuple(-1 if i < len(decl) and decl[i] < 0 else d
                           for i, d in enumerate(shape))
                     for shape, decl in zip(key, self.declared))

    def _code(self, key: tuple) -> GeneratedCode | None:
        return self.plans.get(key) or next(
            (lane.plans[key] for lane in self.lanes[1:] if key in lane.plans), None)

    def _per_size(self) -> tuple[str, ...]:
        """The ops whose kernels are prepared for each concrete shape: those touching a var
        with a dim declared -1 (no spec declares its kernel shape-polymorphic yet)."""
        found: dict[str, None] = {}
        for op in self.plan_block.ops:
            spec = get_spec(op.type)
            if spec.kernel is None:
                continue
            names = op.input_names() + op.output_names()
            if any(d < 0 for n in names for d in _declared_shape(self.program,
                                                                 self.plan_block, n)):
                found[op.type] = None
        return tuple(found)

    @property
    def tier(self) -> str:
        """Which kernels the latest plan runs: 'numpy', 'compiling' or 'loading' (NumPy
        meanwhile), or 'compiled' (docs/architecture.md, "The compiled tier")."""
        tier = self.plan_tier()
        return "numpy" if tier is None else tier.describe()

    def plan_tier(self, code: GeneratedCode | None = None) -> PlanTier | None:
        """The compiled-kernel state of ``code`` (default: the latest plan), if it has any."""
        if code is None:
            if not self.plans:
                return None
            code = list(self.plans.values())[-1]
        return code.plan_state.get(TIER_KEY)

    def run(self, scope_values: dict, arrays: list[Any]) -> Any:
        code = self.plans.get(tuple(a.shape for a in arrays)) or self.plan(arrays)
        try:
            return code.fn(scope_values, *arrays)
        except FluidError:
            raise
        except Exception as e:
            raise self.kernel_error(e, code) from e

    def run_once(self, scope_values: dict) -> None:
        """Run a block that takes no feeds and runs once (block 0's initialisers) without
        generating code for it: each kernel is prepared and called in turn, and the
        persistable values are committed together at the end, as a plan would."""
        analysis = analyse_block(self.program, self.plan_block, {}, self.xp, self._rng_for)
        env = dict(analysis.constants)
        plan_state: dict = {}
        for step in analysis.steps:
            try:
                kernel = prepare_kernel(step.op, analysis.types.__getitem__, self.xp,
                                        step.buffers, self._rng_for(step.index)
                                        if step.spec.random else None, self.is_test,
                                        analysis.constants, plan_state)
                args = [env[n] if n in env else scope_values[n] for n in step.inputs]
                result = args[kernel.input_index] if isinstance(kernel, Forward) \
                    else kernel(*args)
            except FluidError:
                raise
            except Exception as e:
                raise self.op_error(e, step.index) from e
            env.update(zip(step.outputs, (result,) if len(step.outputs) == 1 else result))
        scope_values.update({n: v for n, v in env.items() if n in analysis.persistables})

    def kernel_error(self, error: Exception, code: GeneratedCode | None) -> KernelError:
        chain = [] if code is None else _failing_chain(error.__traceback__, code)
        if len(chain) <= 1:
            return self.op_error(error, chain[0][1] if chain else None)
        return self._nested_error(error, chain)

    def op_error(self, error: Exception, index: int | None) -> KernelError:
        """The error of op ``index`` of the block (None: no op known) failing."""
        if index is None:
            return KernelError(f"{self.block.name or 'block'} failed: "
                               f"{type(error).__name__}: {error}")
        op = self.plan_block.ops[index]   # the index is the generated line's op
        return KernelError(
            f"op {index} of {self.block.name or 'block ' + str(self.block.idx)} failed: "
            f"{type(error).__name__}: {error}\n  in op: "
            f"{describe_op(self.program, self.plan_block, op)}\n"
            f"  No state was changed: the step's updates were not committed.")

    def _nested_error(self, error: Exception, chain: list[_Frame]) -> KernelError:
        """A kernel failed inside sub-blocks: name the op, and each op around it with the
        run (iteration) of its sub-block that failed."""
        code, index, _ = chain[-1]
        block = self.program.blocks[code.block]
        lines = [f"op {index} of block {block.idx} failed: {type(error).__name__}: {error}",
                 f"  in op: {describe_op(self.program, block, block.ops[index])}"]
        for code, index, frame in reversed(chain[:-1]):
            outer = self.plan_block if code.block == self.block.idx else \
                self.program.blocks[code.block]
            op = outer.ops[index]
            counter = code.counters.get(index)
            run = frame.f_locals.get(counter) if counter else None
            where = format_location(op.loc) or "an unknown line"
            at = f" in its iteration {run} (counting from 0)" if isinstance(run, int) else ""
            lines.append(f"  inside {op.type} (op {index} of block {outer.idx}, recorded at "
                         f"{where}){at}")
        lines.append("  No state was changed: the step's updates were not committed.")
        return KernelError("\n".join(lines))


class _Instances:
    """Makes the instances of one plan that take turns (turns.py): ``make(True)`` one whose
    gradient arenas are the parameter arrays of new generations of its fused updates,
    ``make(False)`` a plain one. They share their kernels' state (the tier's too) and
    their random ops' generators, so that they draw one stream, as one plan would.
    ``generate(plan_state, rng_for)`` generates an instance of the analysed plan."""

    def __init__(self, generate: Callable[[dict, Callable[[int], Any]], GeneratedCode],
                 rng_for: Callable[[int], Any], xp: Any, steps: list, arenas: list):
        self.generate, self.base_rng, self.xp, self.steps = generate, rng_for, xp, steps
        self.arenas = arenas
        self.firsts = [step.op.inputs[step.spec.writes_over[1]][0] for step, _ in arenas]
        self.shared: dict = {}
        self.rngs: dict[int, Any] = {}
        self.codes: list[GeneratedCode] = []

    def rng_for(self, index: int) -> Any:
        if index not in self.rngs:
            self.rngs[index] = self.base_rng(index)
        return self.rngs[index]

    def __call__(self, lend: bool) -> tuple[GeneratedCode, list]:
        with gc_paused():
            for first in self.firsts:   # the updates ask for their loops over gradients
                self.shared[lend_key(first)] = lend
            lent = [(state_key(first), arena) for first, (_, arena) in
                    zip(self.firsts, self.arenas) if lend and self._adopts(first)]
            flats = {id(arena): self.xp.empty(arena.shape, arena.dtype) for _, arena in lent}
            with lent_arenas(self.steps, flats):
                code = self.generate(self.shared, self.rng_for)
            gens = self._adopt(lent, flats)
        if self.codes:   # errors in any instance name the plan's lines
            self.codes[0].children[code.filename] = code
            self.codes[0].children.update(code.children)
        self.codes.append(code)
        return code, gens

    def _adopt(self, lent: list, flats: dict[int, Any]) -> list:
        """The updates' generations over the lent arenas: all of them, or (interrupted)
        none left adopted."""
        done: list = []
        try:
            for key, arena in lent:
                buffers = self.shared.get(key)
                if buffers is not None and buffers.writes_over:
                    done.append((buffers, buffers.adopt(flats[id(arena)])))
        except BaseException:
            for buffers, gen in done:
                buffers.forget(gen)
            raise
        return [gen for _, gen in done]

    def _adopts(self, first: str) -> bool:
        """Whether the update of this arena takes it (known once one instance is made;
        an update the compiled tier does not apply to keeps a plain arena)."""
        buffers = self.shared.get(state_key(first))
        return buffers is None or buffers.writes_over


def buffer_bytes(steps: list) -> int:
    """The bytes of the distinct buffers a plan's steps write into (an arena once)."""
    seen: dict[int, Any] = {}
    for step in steps:
        for bufs in step.buffers.values():
            for buf in bufs:
                if buf is not None:
                    root = getattr(buf, "arena", buf)
                    seen[id(root)] = root
    return sum(map(_slot_bytes, seen.values()))


def kernel_bytes(plan: tuple[Any, dict], memory: PlanMemory) -> int:
    """The bytes of the arrays a plan's kernels hold of their own (scratch they made: not
    views of the method's ``memory``), found through the generated function's names and
    the kernels' shared state, a few references deep (attributes, closures, containers).
    ``plan``: (the generated function, its kernels' shared state)."""
    fn, state = plan
    blocks = {id(b) for b in memory.blocks.values()}
    seen: set[int] = set()
    total = 0
    todo = [(v, 0) for v in [*getattr(fn, "__globals__", {}).values(), *state.values()]]
    while todo:
        obj, depth = todo.pop()
        if isinstance(obj, np.ndarray):
            root = obj
            while isinstance(root.base, np.ndarray):
                root = root.base
            if id(root) not in blocks and id(root) not in seen:
                seen.add(id(root))
                total += root.nbytes
            continue
        if id(obj) in seen or depth > 3 or isinstance(obj, (type, types.ModuleType)):
            continue
        seen.add(id(obj))
        todo += [(v, depth + 1) for v in _references(obj)]
    return total


def _references(obj: Any) -> list:
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    refs = list(getattr(obj, "__dict__", {}).values())
    refs += [getattr(obj, n, None) for n in getattr(type(obj), "__slots__", ())
             if isinstance(n, str)]
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            refs.append(cell.cell_contents)
        except ValueError:   # a cell not filled yet
            pass
    return refs


def _slot_bytes(slot: Any) -> int:
    return prod(slot.shape) * np.dtype(slot.dtype).itemsize


#: the least a plan's lent gradient arenas must hold (turns.py): below it, one more small
#: array costs less than a second plan instance
LEND_MIN_BYTES = 256 << 10

_limits = {"plans": 32, "memory": 256 << 20}


def plan_cache(plans: int | None = None, memory: int | None = None) -> dict[str, int]:
    """How many plans each compiled method keeps (one per distinct set of input shapes),
    and how many bytes of preallocated buffers they may hold together; the plan used
    least recently goes first. Returns the settings (with no argument, only returns
    them). Defaults: 32 plans, 256 MiB per method."""
    for what, value in (("plans", plans), ("memory", memory)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"plan_cache {what} must be an int >= 1, got {value!r}")
        if value is not None:
            _limits[what] = value
    return dict(_limits)


@dataclass(frozen=True)
class PlanFamily:
    """The plans of a method for one signature (`BlockRunner.families`): ``inputs`` the
    feeds' shapes, -1 where its plans serve any size; ``shapes`` the concrete shapes
    planned now; ``per_size`` the ops whose kernels are prepared for each concrete shape
    (their specs' kernels are factories of concrete types), under one generated function
    when ``functions`` is 1 and over the method's one memory of buffers."""
    inputs: tuple[tuple[int, ...], ...]
    shapes: tuple[tuple[tuple[int, ...], ...], ...]
    per_size: tuple[str, ...]
    functions: int

    def __repr__(self) -> str:
        dims = ", ".join("[" + ", ".join("?" if d < 0 else str(d) for d in s) + "]"
                         for s in self.inputs)
        return (f"<plans for ({dims}): {len(self.shapes)} shape(s) planned, "
                f"{self.functions} generated function(s); kernels prepared per shape: "
                f"{', '.join(self.per_size) or 'none'}>")


def _declared_shape(program: ProgramDesc, block: BlockDesc, name: str) -> tuple[int, ...]:
    var = program.find_var(block, name)
    return tuple(var.shape) if var is not None else ()


class Lane:
    """Plans that run one call at a time, and what they share: the memory of their
    buffers and their sub-blocks' functions. Concurrent callers each hold a lane."""

    def __init__(self, plans: dict[SignatureKey, GeneratedCode], cache: PlanCache | None,
                 memory: PlanMemory, subplans: SubPlans):
        self.plans, self.memory, self.subplans = plans, memory, subplans
        self.cache = cache if cache is not None else PlanCache(plans)


class PlanCache:
    """Keeps a block's plans within `plan_cache`'s bounds. The generated entry marks a
    plan ``used`` on each call (one attribute store); when a new plan would exceed the
    bounds, the oldest plans not used since the last look go first, and used ones get
    another round (a clock, so the hot path never reorders anything). The memory a
    method's plans share (buffers.PlanMemory) is not a plan's: the bytes counted are
    those of plans with buffers of their own."""

    def __init__(self, plans: dict[SignatureKey, GeneratedCode]):
        self.plans = plans
        self.last: SignatureKey | None = None   # the plan added last
        self.nbytes = 0
        self.evicted = 0

    def add(self, key: SignatureKey, code: GeneratedCode) -> None:
        if key in self.plans:
            return
        last = self.plans.get(self.last) if self.last is not None else None
        if last is not None and last.weigh is not None:   # it ran since: weigh its kernels
            weight = last.weigh()
            self.nbytes += weight - last.nbytes
            last.nbytes = weight
        self.last = key
        code.used = True
        self.plans[key] = code
        self.nbytes += code.nbytes
        while len(self.plans) > 1 and (len(self.plans) > _limits["plans"]
                                       or self.nbytes > _limits["memory"]):
            self._evict_one(keep=key)

    def forget(self, stale: Callable[[GeneratedCode], bool]) -> None:
        """Drop the plans ``stale`` names (planned again when next called)."""
        for key in [k for k, code in self.plans.items() if stale(code)]:
            code = self.plans.pop(key)
            self.nbytes -= code.nbytes
            self.evicted += 1

    def _evict_one(self, keep: SignatureKey) -> None:
        for key in list(self.plans):
            code = self.plans[key]
            if key == keep:
                continue
            if code.used:   # a second chance, at the back of the queue
                code.used = False
                self.plans[key] = self.plans.pop(key)
                continue
            del self.plans[key]
            self.nbytes -= code.nbytes
            self.evicted += 1
            return
        self._evict_one(keep)   # everything had been used: all flags are clear now


def plan_work(analysis: BlockAnalysis) -> int:
    """Elements a step of the plan touches: every var it reads or writes, counted once
    (the size the thread policy classes plans by)."""
    names = {n for step in analysis.steps for n in step.inputs + step.outputs}
    return sum(prod(analysis.types[n].shape) for n in names
               if n in analysis.types and all(d >= 0 for d in analysis.types[n].shape))


def _tier_switch(bind: Callable[[Any, str], str], plan_state: dict) -> list[str]:
    """The line a plan runs first while its compiled kernels are being built: the switch
    to them once they are (between calls, never in one)."""
    tier = plan_state.get(TIER_KEY)
    if tier is None:
        return []
    tier.start()   # compiled kernels: loaded now, or built meanwhile
    if not tier.pending:
        return []
    k = bind(tier, "tier")
    return [f"if {k}.pending: {k}.poll()   # switch to compiled kernels"]


_Frame = tuple  # (GeneratedCode, op index, frame)


def _failing_chain(tb: types.TracebackType | None, code: GeneratedCode) -> list[_Frame]:
    """The generated frames a traceback passed through, outermost first, each with the op
    its line runs: the method's plan, then the sub-block functions it called."""
    codes = {code.filename: code, **code.children}
    chain: list[_Frame] = []
    while tb is not None:
        found = codes.get(tb.tb_frame.f_code.co_filename)
        if found is not None:
            index = found.line_to_op.get(tb.tb_lineno)
            if index is not None:
                chain.append((found, index, tb.tb_frame))
        tb = tb.tb_next
    return chain


def _optimizes(block: BlockDesc) -> bool:
    return any(op.role & OpRole.OPTIMIZE for op in block.ops)
