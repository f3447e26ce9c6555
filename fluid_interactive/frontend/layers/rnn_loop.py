"""`rnn` and `birnn`: an `RNNCell` run over every time step of a padded batch::

    cell = fluid.layers.LSTMCell(hidden_size=64)
    outputs, (h, c) = fluid.layers.rnn(cell, x, sequence_length=lengths)   # x [B, T, D]

The step is traced once into the sub-block of one ``recurrent`` op (what `StaticRNN`
records), so nothing is unrolled and T may change from call to call. With
``sequence_length`` (int64 [B]) a row whose step is at or past its length keeps its
states (an exact selection) and gives zero outputs there; the final states are each
row's states after its last step. Gradients flow to the inputs, the initial states and
the cell's parameters.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import BlockDesc
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .grouped import LayerOps
from .helpers import as_variable
from .rnn import StaticRNN
from .rnn_cells import float_var
from .structure import Structure, flatten, pack
from .tensor import concat

__all__ = ["rnn", "birnn"]


def check_cell(cell: Any, layer: str) -> None:
    if not callable(getattr(cell, "call", None)):
        raise error_at(OpArgumentError, f"{layer}: cell must be an RNNCell (an object with "
                                        f"call(inputs, states)), got {type(cell).__name__}")


def _plain(structure: Structure) -> Any:
    """A structure with lists, tuples and named tuples alike (what a cell may swap)."""
    if structure is None:
        return None
    kind, children = structure
    if kind == "dict":
        return ("dict", [(k, _plain(c)) for k, c in children])
    return ("seq", [_plain(c) for c in children])


def same_dims(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x < 0 or y < 0 or x == y for x, y in zip(a, b))


def check_states(layer: str, given: tuple[Structure, list[Variable]], new: Any,
                 what: str) -> list[Variable]:
    """The vars of ``new``, which must have the structure, shapes and dtypes of the
    states ``given``; an error at the user's line otherwise."""
    structure, olds = given
    new_structure, news = flatten(new, f"{layer}: the new states {what} returns")
    if _plain(new_structure) != _plain(structure):
        raise error_at(OpArgumentError,
                       f"{layer}: {what} returns new states of another structure than the "
                       f"states it was given ({len(news)} var(s) for {len(olds)}; given "
                       f"{_describe(pack(structure, olds))}, returned "
                       f"{_describe(new)}); new states mirror the states")
    for old, v in zip(olds, news):
        if v.dtype != old.dtype or not same_dims(old.shape, v.shape):
            raise error_at(ShapeError, f"{layer}: {what} turns the state {old.name}:"
                                       f"{short_type(old.desc)} into {v.name}:"
                                       f"{short_type(v.desc)}; a state keeps its shape and "
                                       f"dtype from step to step")
    return news


def _describe(value: Any) -> str:
    if isinstance(value, Variable):
        return short_type(value.desc)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return type(value).__name__


def _sequences(xs: list[Variable], time_major: bool) -> None:
    """Every input is [B, T, ...] (time-major: [T, B, ...]) with one B and one T."""
    for x in xs:
        if len(x.shape) < 2:
            layout = "[T, batch, ...]" if time_major else "[batch, T, ...]"
            raise error_at(ShapeError, f"rnn: input {x.name}:{short_type(x.desc)} must be a "
                                       f"padded batch {layout}")
        if not same_dims(x.shape[:2], xs[0].shape[:2]):
            raise error_at(ShapeError, f"rnn: inputs {xs[0].name}:{short_type(xs[0].desc)} "
                                       f"and {x.name}:{short_type(x.desc)} must share their "
                                       f"batch and time dims")


def lengths_var(value: Any, layer: str, what: str = "sequence_length") -> Variable:
    v = as_variable(value, f"{layer}: {what}")
    if v.dtype not in ("int32", "int64") or len(v.shape) != 1:
        raise error_at(OpArgumentError, f"{layer}: {what} {v.name}:{short_type(v.desc)} must "
                                        f"be an int64 vector [batch] of lengths")
    return v


class _Steps:
    """The step masks of a run with lengths: [T, B, 1, ...] per rank, sliced per step."""

    def __init__(self, ops: LayerOps, srnn: StaticRNN, batch_major: Variable,
                 lengths: Variable | None, reverse: bool, parent: BlockDesc):
        self.ops, self.srnn, self.ref, self.lengths = ops, srnn, batch_major, lengths
        self.reverse, self.parent = reverse, parent
        self.masks: dict[int, Variable] = {}

    def mask(self, rank: int) -> Variable:
        """The step's slice of the mask for values of ``rank`` dims ([B, 1, ...])."""
        if rank not in self.masks:
            with self.ops.helper.trace.in_block(self.parent):
                whole = self.ops.op("sequence_step_mask",
                                    {"X": self.ref, "Lengths": self.lengths},
                                    {"rank": rank + 1})
                whole.stop_gradient = True
                if self.reverse:
                    whole = self.ops.flip(whole, [0])
            self.masks[rank] = self.srnn.step_input(whole)
        return self.masks[rank]

    def select(self, new: Variable, old: Variable) -> Variable:
        """``new`` where the row's sequence goes on at this step, else ``old``."""
        return self.ops.where(self.mask(len(new.shape)), new, old)

    def output(self, out: Variable) -> Variable:
        if self.lengths is None:
            return out
        return self.select(out, self.ops.constant([1] * len(out.shape), out.dtype, 0.0))


def rnn(cell: Any, inputs: Any, initial_states: Any = None, sequence_length: Any = None,
        time_major: bool = False, is_reverse: bool = False, **kwargs: Any
        ) -> tuple[Any, Any]:
    """``cell`` run over the time steps of ``inputs``: returns ``(outputs, final_states)``.

    ``inputs``: a var (or a structure of them) ``[batch, T, ...]``, or ``[T, batch, ...]``
    with ``time_major``; ``initial_states``: a structure like the cell's states (default
    `RNNCell.get_initial_states`: zeros of the inputs' dtype); ``sequence_length``: int64
    ``[batch]`` (rows past their length keep their states and give zero outputs);
    ``is_reverse``: each row from its last valid step back to its first (outputs stay at
    their positions).
    ``outputs`` stacks what ``cell.call`` gives at each step, with the layout of
    ``inputs``; ``final_states`` holds each row's states after its last step. Other
    keyword arguments go to ``cell.call`` at every step.
    """
    check_cell(cell, "rnn")
    in_structure, xs = flatten(inputs, "rnn: inputs")
    xs = [float_var(x, "rnn: inputs") for x in xs]
    _sequences(xs, bool(time_major))
    ops = LayerOps("rnn")
    if initial_states is None:
        with ops.recording():
            initial_states = cell.get_initial_states(batch_ref=xs[0], dtype=xs[0].dtype,
                                                     batch_dim_idx=1 if time_major else 0)
    given = flatten(initial_states, "rnn: initial_states")
    inits = [float_var(s, "rnn: initial_states") for s in given[1]]
    for s in inits:
        s.stop_gradient = False   # gradients reach states made by get_initial_states too
    lengths = None if sequence_length is None else lengths_var(sequence_length, "rnn")
    seqs = xs if time_major else [ops.swap_batch_time(x) for x in xs]
    batch_major = xs[0] if not time_major else ops.swap_batch_time(xs[0])
    if is_reverse:
        seqs = [ops.flip(s, [0]) for s in seqs]
    srnn = StaticRNN()
    steps = _Steps(ops, srnn, batch_major, lengths, bool(is_reverse), ops.helper.trace.block)
    with srnn.step():
        step_in = pack(in_structure, [srnn.step_input(s) for s in seqs])
        mems = [srnn.memory(init=s) for s in inits]
        outs, new_states = cell.call(step_in, pack(given[0], mems), **kwargs)
        news = check_states("rnn", (given[0], mems), new_states, "cell.call")
        carried = news if lengths is None else [steps.select(n, m) for n, m in zip(news, mems)]
        for mem, new in zip(mems, carried):
            srnn.update_memory(mem, new)
        out_structure, out_vars = flatten(outs, "rnn: the outputs cell.call returns")
        for o in out_vars:
            srnn.step_output(steps.output(o))
        for c in carried:
            srnn.step_output(c)
    stacked = srnn()
    stacked = stacked if isinstance(stacked, list) else [stacked]
    outputs = stacked[:len(out_vars)]
    if is_reverse:
        outputs = [ops.flip(o, [0]) for o in outputs]
    if not time_major:
        outputs = [ops.swap_batch_time(o) for o in outputs]
    finals = [ops.last(s) for s in stacked[len(out_vars):]]
    return pack(out_structure, outputs), pack(given[0], finals)


def birnn(cell_fw: Any, cell_bw: Any, inputs: Any, initial_states: Any = None,
          sequence_length: Any = None, time_major: bool = False, **kwargs: Any
          ) -> tuple[Any, tuple[Any, Any]]:
    """`rnn` forwards with ``cell_fw`` and backwards (``is_reverse``) with ``cell_bw``
    over the same ``inputs``: returns ``(outputs, (final_states_fw, final_states_bw))``,
    each output the two directions' outputs joined along the last dim. ``initial_states``
    is a pair ``(states_fw, states_bw)`` (default: each cell's zero states)."""
    check_cell(cell_fw, "birnn")
    check_cell(cell_bw, "birnn")
    if initial_states is None:
        states_fw = states_bw = None
    elif isinstance(initial_states, (list, tuple)) and len(initial_states) == 2:
        states_fw, states_bw = initial_states
    else:
        raise error_at(OpArgumentError, "birnn: initial_states must be a pair (states_fw, "
                                        "states_bw), or None")
    out_fw, final_fw = rnn(cell_fw, inputs, states_fw, sequence_length, time_major, **kwargs)
    out_bw, final_bw = rnn(cell_bw, inputs, states_bw, sequence_length, time_major,
                           is_reverse=True, **kwargs)
    fw_structure, fws = flatten(out_fw, "birnn: outputs")
    _, bws = flatten(out_bw, "birnn: outputs")
    if len(fws) != len(bws):
        raise error_at(OpArgumentError, "birnn: cell_fw and cell_bw must give outputs of one "
                                        "structure")
    joined = [concat([f, b], axis=-1) for f, b in zip(fws, bws)]
    return pack(fw_structure, joined), (final_fw, final_bw)
