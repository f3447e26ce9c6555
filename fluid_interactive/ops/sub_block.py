"""Ops that own a sub-block: what their spec says, and what each layer above lends them.

An op owns a block through its ``sub_block`` attribute (`ir.blocks`). Its spec holds a
`SubBlockRule`: which input slot lists the vars of the blocks around that the sub-block
reads and which output slot those it writes, and three functions that each run with a
context the layer above supplies:

``emit(e: EmitContext)``
    writes the Python the op runs as in a generated plan (`runtime.plan`): a real
    ``while``/``if``/``for`` whose body calls the sub-block's own generated function
    (``e.run_body(...)``), planned once per input signature, never unrolled;
``interpret(r: RunContext)``
    runs the op in the reference interpreter (`ops.interpret`), the executable
    definition the generated code is tested against;
the spec's ``grad(g)``
    emits the gradient ops as any spec does; `GradContext.differentiate` (supplied by
    `passes.backward`) differentiates the sub-block into a gradient block.

A sub-block is called like a function: it takes its ``feeds`` (per-run values such as a
step's slice of a sequence) and the vars of ``reads``, and gives back the vars of
``writes`` (carried to the next run), its ``returns`` and, when a gradient needs them, the
values named by the op's ``keep`` attr, one tuple per run, collected in the ``keeps``
output (a var of kind ``step_scopes``). A gradient op's sub-block takes those tuples back
as its feeds, newest first (``replays``); a value it reads only for its shape
(``keep_shapes``) is not kept, and it takes None for it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..ir.records import OpDesc

#: The var kind of a ``keeps`` output: one tuple of kept values per run of a sub-block.
STEP_SCOPES = "step_scopes"


class EmitContext(Protocol):
    """What a rule's ``emit`` gets from the code generator (`runtime.plan.loops`)."""
    op: OpDesc
    attrs: Mapping[str, Any]

    def local(self, var: str) -> str:
        """The Python expression holding var ``var`` of the blocks around."""

    def fresh(self, hint: str) -> str:
        """A new Python local."""

    def line(self, text: str) -> None:
        """One line of code at the op's indentation (``text`` may indent further)."""

    def counter(self) -> str:
        """A new local named as the op's run counter: an error inside the sub-block says
        which run failed by reading it."""

    def bind(self, value: Any, hint: str) -> str:
        """A name of the generated code's namespace holding ``value`` (an object the
        lines call, such as a guard)."""

    def kept(self) -> str | None:
        """The local holding the list of kept runs (one tuple per run), None when the op
        keeps nothing (inference, or no gradient planned)."""

    def run_body(self, feeds: Sequence[str] = (), returns: Sequence[str] = (),
                 indent: int = 1, count: str | None = None) -> None:
        """Call the sub-block once: ``feeds`` are the expressions of its feeds, its
        ``writes`` rebind the locals of those vars, its returns go to the locals
        ``returns``, kept values are appended to the ``keeps`` list; ``count`` is
        incremented after the call."""

    def replayed(self, kept: str) -> list[str]:
        """The expressions of the feeds of a gradient's sub-block that come from ``kept``
        (one tuple of the values the forward op kept), in the order of its feeds; they
        follow its other feeds."""

    def output_array(self, slot: str, i: int, leading: str) -> str:
        """An expression giving the array for output ``slot``[i], stacked along a new
        first dim of length ``leading`` (a Python expression)."""

    def type(self, var: str) -> Any:
        """The concrete type of var ``var`` (a `TensorType`)."""


class RunContext(Protocol):
    """What a rule's ``interpret`` gets from the reference interpreter."""
    op: OpDesc
    attrs: Mapping[str, Any]
    xp: Any

    def value(self, var: str) -> Any:
        """The value of var ``var`` of the blocks around."""

    def set(self, var: str, value: Any) -> None:
        """Set an output of the op."""

    def run_body(self, feeds: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run the sub-block once with these feed values; its writes go to the blocks
        around, and the values of its returns and kept names come back by name. The
        kept tuple is appended to the op's ``keeps`` output."""

    def replayed(self, kept: Any) -> dict[str, Any]:
        """The feeds of a gradient's sub-block taken from one kept run."""


class SubGrad(Protocol):
    """A gradient block being built for a sub-block (see `GradContext.differentiate`)."""
    block: int          # its index

    def grad(self, var: str) -> str | None:
        """The name, inside the gradient block, of the gradient of ``var`` as the
        sub-block received it (before any of its writes), or None."""

    def emit(self, type: str, inputs: Mapping[str, Sequence[str]],
             outputs: Mapping[str, Sequence[str]], attrs: Mapping[str, Any] | None = None
             ) -> None:
        """Append an op to the gradient block."""

    def tmp(self, hint: str) -> str:
        """A fresh name for a var of the gradient block."""

    def zeros_like(self, var: str) -> str:
        """A var of the gradient block holding zeros shaped like ``var``."""

    def finish(self, returns: Sequence[str] = ()) -> tuple[list[str], list[str]]:
        """Close the block: it takes the forward values it reads as its feeds (the forward
        op's ``keep`` attr then names those it keeps per run, and ``keep_shapes`` those
        read only for their shape, whose values it need not keep) and gives back
        ``returns``. Returns ``(reads, writes)``: what it reads and writes of the blocks
        around."""


@dataclass(frozen=True)
class SubBlockRule:
    """How an op runs the block it owns. See the module docstring."""
    reads: str                    # input slot: vars of the blocks around the body reads
    writes: str                   # output slot: vars of the blocks around it writes
    emit: Callable[[EmitContext], None]
    interpret: Callable[[RunContext], None]
    keeps: str = ""               # output slot collecting the kept values of each run
    replays: str = ""             # input slot whose kept tuples feed the body, newest first
    # output slots the op fills in place, given a planned array (stacked step outputs)
    stacked: tuple[str, ...] = ()
    # attrs listing names of vars the sub-block declares or reads (what it keeps per run,
    # a step's inputs and states): the verifier checks that each names a var
    var_attrs: tuple[str, ...] = ("keep", "keep_shapes")
    doc: str = ""

    def body_inputs(self, op: OpDesc) -> list[str]:
        return op.input(self.reads)

    def body_outputs(self, op: OpDesc) -> list[str]:
        return op.output(self.writes)
