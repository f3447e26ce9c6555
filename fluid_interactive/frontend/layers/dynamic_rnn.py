"""`DynamicRNN`: a step written once, run over the time steps of a padded batch
``[B, T, ...]`` whose rows have their own lengths::

    drnn = fluid.layers.DynamicRNN()
    with drnn.block():
        x_t = drnn.step_input(x, lengths=lengths)        # [B, D]: x[:, t]
        h = drnn.memory(shape=[hidden], dtype='float32')  # [B, hidden], zeros at step 0
        new_h = fluid.layers.fc(input=[x_t, h], size=hidden, act='tanh')
        drnn.update_memory(h, new_h)
        drnn.output(new_h)
    hs = drnn()                                           # [B, T, hidden]

Paddle 1.x's names over a dense batch: where Paddle sorted LoD sequences by length and
shrank the batch as rows ended, here every row runs every step and a row whose step is
at or past its length keeps its memory (an exact selection, ``where``), gives a zero
output and gets no gradient; its padded inputs reach the step as zeros, so padding may
hold anything. Rows are never reordered.

The step is traced once into the sub-block of one ``recurrent`` op (what `StaticRNN`
records): the sequences go in time-major (a transposed view), the generated code is a
``for`` loop over the steps, so neither planning nor the source grows with T, and T may
change from call to call (declare the data var ``[-1, -1, D]``).
"""
from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from ...errors import OpArgumentError, ProgramDefinitionError, ShapeError
from ...ir.blocks import outer_interface
from ...ir.records import BlockDesc, SourceLoc, VarDesc, canonical_dtype
from ...ir.source import user_location
from ...ir.text import short_type
from ...ops.sub_block import STEP_SCOPES
from ..tracing import error_at
from ..variable import Variable
from .helpers import as_variable
from .step_network import StepNetwork

__all__ = ["DynamicRNN"]


class _StepInput:
    def __init__(self, seq: str, inner: str, loc: SourceLoc | None):
        self.seq, self.inner, self.loc = seq, inner, loc   # batch-major [B, T, ...]


class _Memory:
    def __init__(self, pre: str, init: str, loc: SourceLoc | None, masked: bool = True):
        self.pre, self.init, self.loc = pre, init, loc
        self.masked = masked                 # rows past their length keep it (not a counter)
        self.new: str | None = None          # what update_memory gave
        self.update_loc: SourceLoc | None = None
        self.carried: str | None = None      # with lengths: new where the row goes on


def _same_dims(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(x < 0 or y < 0 or x == y for x, y in zip(a, b))


def _time_major(rank: int) -> list[int]:
    """The permutation swapping the first two dims: [B, T, ...] <-> [T, B, ...]."""
    return [1, 0] + list(range(2, rank))


class DynamicRNN(StepNetwork):
    """A step written once under ``with drnn.block():`` (``step_input``, ``memory``,
    ``update_memory``, ``output``) and run over the steps of a padded batch [B, T, ...] with
    int64 ``lengths`` [B]; ``drnn()`` gives the outputs [B, T, ...], zero past each row's
    length. See the module docstring and docs/sequences.md."""

    _kind, _enter = "DynamicRNN", ("drnn", "block")

    def __init__(self, name: str | None = None):
        super().__init__("dynamic_rnn", name)
        self._inputs: list[_StepInput] = []
        self._lengths: str | None = None
        self._lengths_loc: SourceLoc | None = None
        self._memories: list[_Memory] = []
        self._outputs: list[tuple[str, SourceLoc | None]] = []
        self._masks: dict[int, str] = {}     # rank -> time-major step mask [T, B, 1, ...]
        self._step_idx: str | None = None

    def block(self) -> AbstractContextManager[None]:
        """Trace the body of one time step."""
        return self._tracing()

    def _outside(self, x: Variable, what: str) -> None:
        if x.name in self._inside(what).vars:
            raise error_at(ProgramDefinitionError,
                           f"DynamicRNN.{what}: {x.name!r} is computed inside the block; "
                           f"compute it before 'with drnn.block():'")

    # --- the user's verbs ----------------------------------------------------------------

    def step_input(self, x: Variable, level: int = 0,
                   lengths: Variable | None = None) -> Variable:
        """The slice ``x[:, t]`` ([B, ...]) of the padded batch ``x`` ([B, T, ...]) at the
        current step. ``lengths`` (int64 [B]) ends each row; it holds for every step
        input of the network, so give it once (or the same var each time). ``level`` is
        Paddle's LoD level: a padded batch has one, so it must be 0."""
        body = self._inside("step_input")
        if level != 0:
            raise error_at(OpArgumentError, f"DynamicRNN.step_input: level must be 0 (a "
                                            f"padded batch has one level of lengths), got "
                                            f"{level!r}")
        x = as_variable(x, "DynamicRNN.step_input")
        self._outside(x, "step_input")
        if len(x.shape) < 2:
            raise error_at(ShapeError, f"DynamicRNN.step_input: {x.name}:{short_type(x.desc)} "
                                       f"must be a padded batch [B, T, ...]")
        if self._inputs:
            self._check_same_batch(x)
        if lengths is not None:
            self._take_lengths(as_variable(lengths, "DynamicRNN.step_input: lengths"))
        trace = self._helper.trace
        name = trace.unique_in_block(f"{self._helper.name}.step_in_{len(self._inputs)}")
        trace.declare(VarDesc(name, x.shape[:1] + x.shape[2:], x.dtype,
                              stop_gradient=x.stop_gradient), block=body)
        self._inputs.append(_StepInput(x.name, name, user_location()))
        return Variable(trace, name)

    def _declared(self, name: str) -> VarDesc:
        """The declaration of a var this DynamicRNN made or was given."""
        var = self._helper.trace.find(name)
        if var is None:
            raise KeyError(f"DynamicRNN: {name!r} is declared in no block of this method")
        return var

    def _check_same_batch(self, x: Variable) -> None:
        first = self._declared(self._inputs[0].seq)
        if not _same_dims(first.shape[:2], x.shape[:2]):
            raise error_at(ShapeError, f"DynamicRNN.step_input: {x.name}:{short_type(x.desc)} "
                                       f"and the first step input {first.name}:"
                                       f"{short_type(first)} must share B and T")

    def _take_lengths(self, lengths: Variable) -> None:
        if self._lengths is not None and lengths.name != self._lengths:
            raise error_at(OpArgumentError,
                           f"DynamicRNN.step_input: lengths {lengths.name!r} differs from the "
                           f"lengths {self._lengths!r} given before; one DynamicRNN runs all "
                           f"its step inputs over the same lengths")
        if lengths.name in (self._block.vars if self._block else {}):
            raise error_at(ProgramDefinitionError, f"DynamicRNN.step_input: lengths "
                                                   f"{lengths.name!r} is computed inside the "
                                                   f"block; compute it before the block")
        self._lengths, self._lengths_loc = lengths.name, user_location()

    @property
    def step_idx(self) -> Variable:
        """The index of the current step, an int64 var [1] (0 at the first step): a
        counter the network carries from step to step, the same for every row."""
        body = self._inside("step_idx")
        if self._step_idx is None:
            from .tensor import fill_constant
            trace = self._helper.trace
            with trace.in_block(self._parent):   # type: ignore[arg-type]
                start = fill_constant([1], "int64", 0)
            pre = trace.unique_in_block(f"{self._helper.name}.step_idx")
            trace.declare(VarDesc(pre, (1,), "int64", stop_gradient=True), block=body)
            counter = _Memory(pre, start.name, user_location(), masked=False)
            counter.new = self._append("increment", {"X": [pre]}, {"step": 1.0},
                                       counter.loc, "next_step_idx")
            self._memories.append(counter)
            self._step_idx = pre
        return Variable(self._helper.trace, self._step_idx)

    def static_input(self, x: Variable) -> Variable:
        """``x`` itself, the same at every step (Paddle reordered and shrank it with the
        batch; here rows stay in place, so the step reads ``x`` as it is)."""
        x = as_variable(x, "DynamicRNN.static_input")
        self._outside(x, "static_input")
        return x

    def memory(self, init: Variable | None = None, shape: Sequence[int] | None = None,
               value: float = 0.0, need_reorder: bool = False,
               dtype: Any = "float32") -> Variable:
        """A memory: ``init`` ([B, ...], a var of the method) at step 0, or ``value`` in
        ``[B] + shape`` of ``dtype`` (``shape`` without the batch dim, which comes from
        the step input); then what `update_memory` gave at the step before, for the rows
        whose sequence goes on. ``need_reorder`` is accepted for Paddle's code: rows are
        never reordered here."""
        body = self._inside("memory")
        trace = self._helper.trace
        if init is None:
            init = self._boot(shape, value, dtype)
        init = as_variable(init, "DynamicRNN.memory: init")
        self._outside(init, "memory")
        self._check_init(init)
        pre = trace.unique_in_block(f"{self._helper.name}.memory_{len(self._memories)}")
        trace.declare(VarDesc(pre, init.shape, init.dtype), block=body)
        self._memories.append(_Memory(pre, init.name, user_location()))
        return Variable(trace, pre)

    def _boot(self, shape: Sequence[int] | None, value: float, dtype: Any) -> Variable:
        from .tensor import fill_constant_batch_size_like
        if shape is None:
            raise error_at(OpArgumentError, "DynamicRNN.memory needs init, or shape (the "
                                            "memory's dims after the batch dim)")
        dims = list(shape) if isinstance(shape, (list, tuple)) else None
        if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0
                           for d in dims):
            raise error_at(OpArgumentError,
                           f"DynamicRNN.memory: shape lists the memory's dims after the batch "
                           f"dim, each a positive int (shape=[32] gives [B, 32]), got {shape!r}")
        if not self._inputs:
            raise error_at(ProgramDefinitionError,
                           "DynamicRNN.memory(shape=...) takes its batch size from the step "
                           "input: call drnn.step_input(x, lengths=...) first, or give init")
        try:
            dt = canonical_dtype(dtype)
        except TypeError as e:
            raise error_at(OpArgumentError, f"DynamicRNN.memory: {e}") from None
        trace = self._helper.trace
        with trace.in_block(self._parent):   # type: ignore[arg-type]
            return fill_constant_batch_size_like(Variable(trace, self._inputs[0].seq),
                                                 [-1] + dims, dt, value)

    def _check_init(self, init: Variable) -> None:
        first = self._helper.trace.find(self._inputs[0].seq) if self._inputs else None
        if not init.shape or (first is not None and not _same_dims(first.shape[:1],
                                                                   init.shape[:1])):
            batch = f" (B = {first.shape[0]}, from {first.name})" if first is not None else ""
            raise error_at(ShapeError, f"DynamicRNN.memory: init {init.name}:"
                                       f"{short_type(init.desc)} must be [B, ...], one row "
                                       f"per sequence of the batch{batch}")

    def update_memory(self, ex_mem: Variable, new_mem: Variable) -> None:
        """``new_mem`` is what memory ``ex_mem`` holds at the next step (rows whose
        sequence has ended keep ``ex_mem``)."""
        self._inside("update_memory")
        ex_mem = as_variable(ex_mem, "DynamicRNN.update_memory: ex_mem")
        new_mem = as_variable(new_mem, "DynamicRNN.update_memory: new_mem")
        memory = next((m for m in self._memories if m.pre == ex_mem.name), None)
        if memory is None:
            raise error_at(OpArgumentError, f"DynamicRNN.update_memory: {ex_mem.name!r} is not "
                                            f"a memory of this DynamicRNN; make one with "
                                            f"drnn.memory(init=...) or drnn.memory(shape=...)")
        if memory.new is not None:
            raise error_at(ProgramDefinitionError, f"DynamicRNN.update_memory: memory "
                                                   f"{ex_mem.name!r} is already updated (to "
                                                   f"{memory.new!r}); update it once per step")
        if new_mem.dtype != ex_mem.dtype or not _same_dims(ex_mem.shape, new_mem.shape):
            raise error_at(ShapeError, f"DynamicRNN.update_memory: memory {ex_mem.name}:"
                                       f"{short_type(ex_mem.desc)} cannot take "
                                       f"{new_mem.name}:{short_type(new_mem.desc)}; a memory "
                                       f"keeps its shape and dtype from step to step")
        memory.new, memory.update_loc = new_mem.name, user_location()

    def output(self, *outputs: Variable) -> None:
        """Each of ``outputs`` ([B, ...] at each step) becomes an output [B, T, ...] of the
        network, zero where a row's sequence has ended."""
        self._inside("output")
        for o in outputs:
            o = as_variable(o, "DynamicRNN.output")
            if not o.shape:
                raise error_at(ShapeError, f"DynamicRNN.output: {o.name}:{short_type(o.desc)} "
                                           f"must be [B, ...], one row per sequence")
            self._check_output_batch(o)
            self._outputs.append((o.name, user_location()))

    def _check_output_batch(self, o: Variable) -> None:
        first = self._helper.trace.find(self._inputs[0].inner) if self._inputs else None
        if first is not None and not _same_dims(first.shape[:1], o.shape[:1]):
            raise error_at(ShapeError, f"DynamicRNN.output: {o.name}:{short_type(o.desc)} "
                                       f"must be [B, ...] with the batch of the step input "
                                       f"{first.name}:{short_type(first)}")

    # --- recording the loop --------------------------------------------------------------

    def _finish(self, body: BlockDesc) -> None:
        self._check_complete()
        mask_feeds = self._mask_memories(body)
        trace = self._helper.trace
        reads, writes = outer_interface(trace.program, body)
        if writes:
            raise error_at(ProgramDefinitionError,
                           f"a DynamicRNN block writes {writes} of the method around it; "
                           f"carry values from step to step with drnn.memory / update_memory")
        body.feeds = [i.inner for i in self._inputs] + [f for _, f in mask_feeds] + \
            [m.pre for m in self._memories]
        body.returns = tuple(self._carried(m) for m in self._memories) + \
            tuple(n for n, _ in self._outputs)
        sequences = [self._time_major_input(i) for i in self._inputs]
        stacked = self._record(body, reads, sequences, mask_feeds)
        self._result = [self._batch_major_output(s, loc)
                        for s, (_, loc) in zip(stacked, self._outputs)]

    def _check_complete(self) -> None:
        if not self._inputs:
            raise error_at(ProgramDefinitionError, "a DynamicRNN needs a step_input (the "
                                                   "padded batch it runs over)")
        if not self._outputs:
            raise error_at(ProgramDefinitionError, "a DynamicRNN needs an output: "
                                                   "drnn.output(value) in the block")
        for m in self._memories:
            if m.new is None:
                raise error_at(ProgramDefinitionError,
                               f"memory {m.pre!r} is never updated; call "
                               f"drnn.update_memory(memory, new_value) in the block")

    @staticmethod
    def _carried(m: _Memory) -> str:
        return m.carried or m.new or m.pre

    def _append(self, op_type: str, inputs: dict[str, list[str]], attrs: dict | None,
                loc: SourceLoc | None, hint: str) -> str:
        """One op with one output, recorded at the user's line ``loc``."""
        trace = self._helper.trace
        out = trace.unique_in_block(f"{self._helper.name}.{hint}")
        op = trace.append_op(op_type, inputs, {"Out": [out]}, attrs, loc=loc)
        return op.output("Out")[0]

    def _mask(self, rank: int) -> str:
        """The time-major step mask [T, B, 1, ...] of ``rank`` dims, made once per rank
        in the method's block."""
        if rank not in self._masks:
            trace, lengths = self._helper.trace, self._lengths
            if lengths is None:   # only a DynamicRNN with lengths masks its steps
                raise ValueError("DynamicRNN: a step mask needs the lengths of step_input")
            with trace.in_block(self._parent):   # type: ignore[arg-type]
                name = trace.unique_in_block(f"{self._helper.name}.step_mask_{rank}")
                trace.append_op("sequence_step_mask", {"X": [self._inputs[0].seq],
                                                       "Lengths": [lengths]},
                                {"Out": [name]}, {"rank": rank}, loc=self._lengths_loc)
            self._masks[rank] = name
        return self._masks[rank]

    def _mask_memories(self, body: BlockDesc) -> list[tuple[str, str]]:
        """With lengths: each memory's next value is ``where(mask_t, new, memory)``, with
        the step's slice of a mask of the memory's rank (a step input of the loop).
        Returns (mask, its step slice) pairs."""
        if self._lengths is None:
            return []
        trace = self._helper.trace
        feeds: dict[int, str] = {}
        for m in self._memories:
            if not m.masked:
                continue
            rank = len(body.vars[m.pre].shape)
            if rank not in feeds:
                feeds[rank] = f"{self._mask(rank + 1)}.t"
                batch = body.vars[self._inputs[0].inner].shape[:1]
                trace.declare(VarDesc(feeds[rank], batch + (1,) * (rank - 1), "bool",
                                      stop_gradient=True), block=body)
            with trace.in_block(body):
                m.carried = trace.unique_in_block(f"{m.pre}.next")
                trace.append_op("where", {"Condition": [feeds[rank]], "X": [m.new or m.pre],
                                          "Y": [m.pre]}, {"Out": [m.carried]},
                                loc=m.update_loc)
        return [(self._mask(rank + 1), feed) for rank, feed in feeds.items()]

    def _time_major_input(self, step: _StepInput) -> str:
        """The sequence [T, B, ...] the loop slices; with lengths its padded steps are
        zeros, so the step never computes with what padding holds."""
        rank = len(self._helper.trace.find(step.seq).shape)   # type: ignore[union-attr]
        with self._helper.trace.in_block(self._parent):   # type: ignore[arg-type]
            seq = self._append("transpose", {"X": [step.seq]}, {"axis": _time_major(rank)},
                               step.loc, "time_major")
            if self._lengths is None:
                return seq
            return self._select(self._mask(rank), seq, step.loc, "step_in")

    def _select(self, mask: str, seq: str, loc: SourceLoc | None, hint: str) -> str:
        """``seq`` where ``mask``, else zeros (one zero, broadcast: no array of T steps)."""
        var = self._declared(seq)
        zero = self._append("fill_constant", {}, {"shape": [1] * len(var.shape),
                                                  "dtype": var.dtype, "value": 0.0},
                            loc, "zero")
        return self._append("where", {"Condition": [mask], "X": [seq], "Y": [zero]}, None,
                            loc, hint)

    def _batch_major_output(self, stacked: str, loc: SourceLoc | None) -> Variable:
        trace = self._helper.trace
        rank = len(trace.find(stacked).shape)   # type: ignore[union-attr]
        if self._lengths is not None:
            stacked = self._select(self._mask(rank), stacked, loc, "masked_out")
        out = self._append("transpose", {"X": [stacked]}, {"axis": _time_major(rank)}, loc,
                           "out")
        return Variable(trace, out)

    def _record(self, body: BlockDesc, reads: list[str], sequences: list[str],
                mask_feeds: list[tuple[str, str]]) -> list[str]:
        """The ``recurrent`` op running the block; returns its stacked outputs [T, B, ...]."""
        trace, name = self._helper.trace, self._helper.name
        steps = trace.find(self._inputs[0].seq).shape[1]   # type: ignore[union-attr]
        outs = []
        for k, (inner, _) in enumerate(self._outputs):
            var = trace.find(inner) or body.vars[inner]
            outs.append(trace.unique_in_block(f"{name}.stacked_{k}"))
            trace.declare(VarDesc(outs[-1], (steps,) + var.shape, var.dtype))
        kept = trace.unique_in_block(f"{name}.step_scopes")
        trace.declare(VarDesc(kept, (), "float32", kind=STEP_SCOPES, stop_gradient=True))
        step_inputs = [i.inner for i in self._inputs] + [f for _, f in mask_feeds]
        attrs = {"sub_block": body.idx, "step_inputs": step_inputs,
                 "ex_states": [m.pre for m in self._memories],
                 "states": [self._carried(m) for m in self._memories],
                 "step_outputs": [n for n, _ in self._outputs]}
        trace.append_op("recurrent", {"Inputs": sequences + [m for m, _ in mask_feeds],
                                      "InitialStates": [m.init for m in self._memories],
                                      "Parameters": reads},
                        {"Outputs": outs, "StepScopes": [kept]}, attrs, loc=self._loc)
        return outs
