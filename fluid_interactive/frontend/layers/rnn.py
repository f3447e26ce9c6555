"""`StaticRNN`: a step function written once, run over every time step of time-major
sequences (``[T, batch, ...]``), with memories carried from step to step::

    rnn = fluid.layers.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)                               # [batch, features]
        h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)  # zeros at step 0
        h = fluid.layers.fc(input=[x_t, h_prev], size=hidden, act='tanh')
        rnn.update_memory(h_prev, h)
        rnn.step_output(h)
    hs = rnn()                                                # [T, batch, hidden]

The step is traced once into a sub-block run by one ``recurrent`` op: the generated code
is a ``for`` loop over the steps calling the step's function, so neither planning nor the
source grows with T, and T may change from call to call (declare the data var's time
dimension as -1). Parameters created in the step are shared by all steps.
"""
from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from ...errors import OpArgumentError, ProgramDefinitionError, ShapeError
from ...ir.blocks import outer_interface
from ...ir.records import BlockDesc, VarDesc
from ...ir.text import short_type
from ...ops.sub_block import STEP_SCOPES
from ..hints import batch_major_steps
from ..tracing import error_at
from ..variable import Variable
from .helpers import as_variable
from .step_network import StepNetwork

__all__ = ["StaticRNN"]


class _Memory:
    def __init__(self, pre: str, init: str):
        self.pre, self.init = pre, init
        self.new: str | None = None   # what the step gives it for the next step


class StaticRNN(StepNetwork):
    """A recurrent network over time-major sequences; see the module docstring."""

    _kind, _enter = "StaticRNN", ("rnn", "step")

    def __init__(self, name: str | None = None):
        super().__init__("static_rnn", name)
        self._inputs: list[tuple[str, str]] = []      # (sequence around, its step slice)
        self._memories: list[_Memory] = []
        self._outputs: list[str] = []

    def step(self) -> AbstractContextManager[None]:
        """Trace the body of one time step."""
        return self._tracing()

    def step_input(self, x: Variable) -> Variable:
        """The slice ``x[t]`` of the time-major sequence ``x`` ([T, batch, ...])."""
        body = self._inside("step_input")
        x = as_variable(x, "StaticRNN.step_input")
        if x.name in body.vars:
            raise error_at(ProgramDefinitionError,
                           f"StaticRNN.step_input: {x.name!r} is computed inside the step; "
                           f"the sequence a step slices is made before 'with rnn.step():' "
                           f"(move the transpose or reshape above it)")
        if len(x.shape) < 2:
            raise error_at(ShapeError, f"StaticRNN.step_input: {x.name}:{short_type(x.desc)} "
                                       f"must be time-major [T, batch, ...]")
        batch_major_steps(self._helper.trace, x.name)
        name = self._helper.trace.unique_in_block(f"{self._helper.name}.step_in_"
                                                  f"{len(self._inputs)}")
        self._helper.trace.declare(VarDesc(name, x.shape[1:], x.dtype,
                                           stop_gradient=x.stop_gradient), block=body)
        self._inputs.append((x.name, name))
        return Variable(self._helper.trace, name)

    def memory(self, init: Variable | None = None, shape: Sequence[int] | None = None,
               batch_ref: Variable | None = None, init_value: float = 0.0,
               init_batch_dim_idx: int = 0, ref_batch_dim_idx: int = 1) -> Variable:
        """A memory: ``init`` at step 0 (a var of the method), or ``init_value`` in
        ``shape`` with its dim ``init_batch_dim_idx`` the batch size of ``batch_ref`` (a
        step input, or a sequence [T, batch, ...]: its dim ``ref_batch_dim_idx``); then
        what `update_memory` gave at the step before."""
        body = self._inside("memory")
        trace = self._helper.trace
        if init is None:
            init = self._boot(shape, batch_ref, init_value, init_batch_dim_idx,
                              ref_batch_dim_idx)
        init = as_variable(init, "StaticRNN.memory: init")
        pre = trace.unique_in_block(f"{self._helper.name}.memory_{len(self._memories)}")
        trace.declare(VarDesc(pre, init.shape, init.dtype), block=body)
        self._memories.append(_Memory(pre, init.name))
        return Variable(trace, pre)

    def _boot(self, shape: Sequence[int] | None, batch_ref: Variable | None, value: float,
              init_dim: int, ref_dim: int) -> Variable:
        from .tensor import fill_constant_batch_size_like
        if shape is None or batch_ref is None:
            raise error_at(OpArgumentError, "StaticRNN.memory needs init, or both shape and "
                                            "batch_ref")
        ref = as_variable(batch_ref, "StaticRNN.memory: batch_ref").name
        ref = next((outer for outer, inner in self._inputs if inner == ref), ref)
        trace = self._helper.trace
        with trace.in_block(self._parent):   # type: ignore[arg-type]
            ref_var = Variable(trace, ref)
            dtype = ref_var.dtype if ref_var.dtype.startswith("float") else "float32"
            return fill_constant_batch_size_like(ref_var, list(shape), dtype, value,
                                                 input_dim_idx=ref_dim,
                                                 output_dim_idx=init_dim)

    def update_memory(self, mem: Variable, var: Variable) -> None:
        """``var`` is what memory ``mem`` holds at the next step."""
        self._inside("update_memory")
        mem, var = as_variable(mem, "update_memory: mem"), as_variable(var, "update_memory")
        memory = next((m for m in self._memories if m.pre == mem.name), None)
        if memory is None:
            raise error_at(OpArgumentError, f"update_memory: {mem.name!r} is not a memory of "
                                            f"this StaticRNN (make one with rnn.memory)")
        if len(var.shape) != len(mem.shape) or var.dtype != mem.dtype:
            raise error_at(ShapeError, f"update_memory: memory {mem.name}:"
                                       f"{short_type(mem.desc)} cannot take "
                                       f"{var.name}:{short_type(var.desc)}")
        memory.new = var.name

    def step_output(self, o: Variable) -> None:
        """``o`` at every step, stacked into an output [T, ...] of the RNN."""
        self._inside("step_output")
        self._outputs.append(as_variable(o, "StaticRNN.step_output").name)

    def output(self, *outputs: Variable) -> None:
        """`step_output` of each of ``outputs``."""
        for o in outputs:
            self.step_output(o)

    def _finish(self, body: BlockDesc) -> None:
        trace = self._helper.trace
        if not self._inputs:
            raise error_at(ProgramDefinitionError, "a StaticRNN needs a step_input (the "
                                                   "sequence it runs over)")
        if not self._outputs:
            raise error_at(ProgramDefinitionError, "a StaticRNN needs a step_output")
        for m in self._memories:
            if m.new is None:
                raise error_at(ProgramDefinitionError,
                               f"memory {m.pre!r} is never updated; call "
                               f"rnn.update_memory(memory, new_value) in the step")
        reads, writes = outer_interface(trace.program, body)
        if writes:
            raise error_at(ProgramDefinitionError,
                           f"a StaticRNN step writes {writes} of the method around it; carry "
                           f"values from step to step with rnn.memory / update_memory")
        body.feeds = [inner for _, inner in self._inputs] + [m.pre for m in self._memories]
        body.returns = tuple(m.new or m.pre for m in self._memories) + tuple(self._outputs)
        self._record(body, reads)

    def _record(self, body: BlockDesc, reads: list[str]) -> None:
        trace, helper = self._helper.trace, self._helper
        steps = trace.find(self._inputs[0][0]).shape[0]   # type: ignore[union-attr]
        outs = []
        for k, inner in enumerate(self._outputs):
            var = trace.find(inner) or body.vars[inner]
            name = trace.unique_in_block(f"{helper.name}.out_{k}")
            trace.declare(VarDesc(name, (steps,) + var.shape, var.dtype))
            outs.append(name)
        kept = trace.unique_in_block(f"{helper.name}.step_scopes")
        trace.declare(VarDesc(kept, (), "float32", kind=STEP_SCOPES, stop_gradient=True))
        attrs = {"sub_block": body.idx, "step_inputs": [i for _, i in self._inputs],
                 "ex_states": [m.pre for m in self._memories],
                 "states": [m.new for m in self._memories], "step_outputs": self._outputs}
        trace.append_op("recurrent", {"Inputs": [o for o, _ in self._inputs],
                                      "InitialStates": [m.init for m in self._memories],
                                      "Parameters": reads},
                        {"Outputs": outs, "StepScopes": [kept]}, attrs, loc=self._loc)
        self._result = [Variable(trace, n) for n in outs]
