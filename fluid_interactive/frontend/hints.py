"""Likely mistakes the trace can see: forms that run, but probably not as meant.

Each check looks only at what the method declares (its data vars, how they were declared,
what other layers were given) and warns with a `SequenceWarning` at the user's line,
saying what is likely wrong and the right form. The right form never warns:

* `batch_major_steps`: a ``StaticRNN`` steps over dim 0 (time-major ``[T, B, ...]``); a
  step input whose dim 0 is the batch dim a data var got from ``append_batch_size``, with
  the sequence in dim 1, would step over the samples of the batch instead;
* `unpadded_pool`: a pool over a padded batch ``[B, T, ...]`` without ``lengths`` counts
  every row ``T`` long; it warns when the method declares the rows' lengths (an int data
  var ``[B]`` or ``[B, 1]`` that another sequence layer takes as ``lengths``, or whose
  name says it holds lengths) and does not pass them.
"""
from __future__ import annotations

from ..errors import SequenceWarning
from ..ir.blocks import method_of
from ..ir.records import INT_DTYPES, BlockDesc, OpDesc, VarDesc
from ..ir.source import warn_at_user
from ..ir.text import short_type
from .tracing import TraceContext

__all__ = ["batch_major_steps", "unpadded_pool"]

#: How many ops back from a step input the search for the data var it came from goes.
_MAX_HOPS = 32


def _writer(trace: TraceContext, name: str) -> OpDesc | None:
    """The last op recorded so far that writes ``name``, in the current block or one
    around it."""
    block: BlockDesc | None = trace.block
    while block is not None:
        for op in reversed(block.ops):
            if name in op.output_names():
                return op
        block = trace.program.blocks[block.parent_idx] if block.parent_idx > 0 else None
    return None


def _batch_major_origin(trace: TraceContext, name: str) -> str | None:
    """The data var with a prepended batch dim that ``name`` ([B, T, ...]) comes from,
    following the ops that keep its first two dims; None when there is none."""
    var = trace.find(name)
    if var is None or len(var.shape) < 3 or var.shape[0] != -1 or var.shape[1] < 0:
        return None
    lead = var.shape[:2]
    for _ in range(_MAX_HOPS):
        if name in trace.batch_prepended:
            return name
        op = _writer(trace, name)
        if op is None:
            return None
        following = [n for n in op.input_names()
                     if (v := trace.find(n)) is not None and v.shape[:2] == lead]
        if not following:
            return None
        name = following[0]
    return None


def batch_major_steps(trace: TraceContext, name: str) -> None:
    """Warn when the sequence ``name`` a ``StaticRNN`` step slices is batch-major."""
    var = trace.find(name)
    origin = _batch_major_origin(trace, name)
    if origin is None or var is None:
        return
    rank = len(var.shape)
    perm = [1, 0] + list(range(2, rank))
    steps, rest = var.shape[1], ", ".join(str(d) for d in var.shape[2:])
    source = "it is" if origin == name else f"it comes from data var {origin!r}, which is"
    warn_at_user(
        f"StaticRNN.step_input: {name}:{short_type(var)} looks batch-major ([batch, T, ...]): "
        f"{source} declared with append_batch_size, so dim 0 is the batch and dim 1 "
        f"({steps}) the sequence; a StaticRNN steps over dim 0, so each step would see one "
        f"sample and learn nothing of the sequence. Make it time-major before "
        f"'with rnn.step():': x = fluid.layers.transpose(x, perm={perm}), or declare "
        f"data({origin!r}, shape=[{steps}, -1, {rest}], append_batch_size=False) and feed "
        f"[T, batch, ...]; for batch-major data with lengths use DynamicRNN",
        SequenceWarning)


def _looks_like_lengths(trace: TraceContext, var: VarDesc) -> bool:
    return (var.is_data and var.dtype in INT_DTYPES and var.shape in ((-1,), (-1, 1))
            and (var.name in trace.lengths_given or "len" in var.name.lower()))


def unpadded_pool(trace: TraceContext, layer: str, name: str, lengths: object) -> None:
    """Warn when ``layer`` pools the padded batch ``name`` without ``lengths`` while the
    method declares the rows' lengths."""
    var = trace.find(name)
    if lengths is not None or var is None or len(var.shape) < 2 or var.shape[0] != -1:
        return
    method = method_of(trace.program, trace.block)
    found = [v for v in method.vars.values() if _looks_like_lengths(trace, v)]
    if not found:
        return
    given = found[0]
    warn_at_user(
        f"{layer}: {name}:{short_type(var)} is pooled without lengths=, so every row counts "
        f"as {'T' if var.shape[1] < 0 else var.shape[1]} steps long and its padding is "
        f"pooled too; {trace.method}() declares {given.name}:{short_type(given)}, which "
        f"looks like the rows' lengths: pass it, {layer}(..., lengths={given.name})",
        SequenceWarning)
