"""Decoding one token at a time (Paddle 1.8's `Decoder` and `dynamic_decode`): a decoder
says how to start, how to take one step and when a sequence has finished; `dynamic_decode`
runs its steps in a `While` loop (a sub-block, never unrolled) until every sequence has
finished or ``max_step_num`` is passed, and stacks each step's outputs from tensor arrays::

    decoder = fluid.layers.BeamSearchDecoder(cell, start_token=0, end_token=1, beam_size=4,
                                             embedding_fn=embed, output_fn=project)
    ids, states = fluid.layers.dynamic_decode(decoder, inits=encoder_state, max_step_num=30)

`BasicDecoder` (with `TrainingHelper`, `GreedyEmbeddingHelper` or `SampleEmbeddingHelper`)
and `BeamSearchDecoder` are the decoders Paddle ships; a `Decoder` subclass writes
``initialize``, ``step`` and, optionally, ``finalize``. docs/decoding.md has the rules.
"""
from __future__ import annotations

from typing import Any

from ...errors import DTypeError, OpArgumentError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .compare import less_equal, logical_and, logical_not, logical_or
from .control_flow import While, increment
from .grouped import LayerOps
from .helpers import LayerHelper, as_variable
from .index import check_bool, check_int
from .rnn_loop import check_states
from .structure import Structure, flatten, pack
from .tensor import assign, cast, unsqueeze
from .tensor_array import array_write

__all__ = ["Decoder", "dynamic_decode"]


class Decoder:
    """What `dynamic_decode` runs: ``initialize`` once, then ``step`` until every sequence
    has finished, then ``finalize`` (optional)."""

    #: Whether ``step`` gives every sequence's finished flag itself (a beam search, whose
    #: beams change places): `dynamic_decode` then takes it as it is, and the lengths from
    #: the states' ``lengths``, instead of keeping a flag per position (Paddle 2.0's fix).
    tracks_own_finished = False

    #: Whether the decoder may never finish (it stops at an end token the model might
    #: never give): `dynamic_decode` then needs ``max_step_num``.
    may_run_forever = False

    def initialize(self, inits: Any) -> tuple[Any, Any, Variable]:
        """``(initial_inputs, initial_states, finished)`` from ``inits`` (what
        `dynamic_decode` was given); ``finished`` is a bool var, one flag per sequence."""
        raise NotImplementedError(f"{type(self).__name__} must define initialize(inits)")

    def step(self, time: Variable, inputs: Any, states: Any, **kwargs: Any
             ) -> tuple[Any, Any, Any, Variable]:
        """``(outputs, next_states, next_inputs, finished)`` for step ``time`` (int64
        [1]); ``next_states`` and ``next_inputs`` keep the structure, shapes and dtypes of
        ``states`` and ``inputs``."""
        raise NotImplementedError(f"{type(self).__name__} must define step(time, inputs, "
                                  f"states)")

    def set_max_steps(self, steps: int | None) -> None:
        """`dynamic_decode` says, before ``initialize``, how many steps it takes at most
        (None: until every sequence has finished). Not Paddle's; nothing by default."""

    def finalize(self, outputs: Any, final_states: Any, sequence_lengths: Variable
                 ) -> tuple[Any, Any]:
        """``(final_outputs, final_states)`` from the stacked outputs ``[T, batch, ...]``,
        the states after the last step and each sequence's length."""
        raise NotImplementedError


def _copies(ops: LayerOps, value: Any, what: str) -> tuple[Structure, list[Variable]]:
    """The vars of ``value`` copied into new vars that the loop carries (the loop writes
    them each step; the vars given stay as they were)."""
    structure, vs = flatten(value, what)
    return structure, [ops.copy(v) for v in vs]


def _finished(value: Any, what: str) -> Variable:
    v = as_variable(value, what)
    if v.dtype != "bool":
        raise error_at(DTypeError, f"{what} {v.name}:{short_type(v.desc)} must be a bool var "
                                   f"(a flag per sequence)")
    return v


def _impute(finished: Variable, old: Variable, new: Variable) -> Variable:
    """``old`` where the sequence had finished before this step, else ``new``."""
    cond = finished
    if len(old.shape) > len(finished.shape):
        cond = unsqueeze(finished, list(range(len(finished.shape), len(old.shape))))
    return LayerHelper("dynamic_decode").append_one(
        "where", {"Condition": cond, "X": old, "Y": new}, final=False)


def _max_steps(decoder: Any, max_step_num: Any) -> int | None:
    if max_step_num is None:
        if getattr(decoder, "may_run_forever", False):
            raise error_at(OpArgumentError,
                           f"dynamic_decode: {type(decoder).__name__} stops when every "
                           f"sequence gives its end token, which a model may never do; give "
                           f"max_step_num (the loop runs at most max_step_num + 1 steps)")
        return None
    return check_int(max_step_num, "max_step_num", "dynamic_decode", minimum=0)


class _Carried:
    """The vars the loop carries from step to step: inputs, states, finished, lengths."""

    def __init__(self, ops: LayerOps, inputs: Any, states: Any, finished: Variable):
        self.inputs = _copies(ops, inputs, "dynamic_decode: the initial inputs")
        self.states = _copies(ops, states, "dynamic_decode: the initial states")
        self.finished = ops.copy(finished)
        self.lengths = ops.op("fill_any_like", {"X": finished}, {"value": 0.0,
                                                                 "dtype": "int64"})
        for v in (self.finished, self.lengths):
            v.stop_gradient = True

    def current(self) -> tuple[Any, Any]:
        return pack(*self.inputs), pack(*self.states)

    def update(self, inputs: list[Variable], states: list[Variable], finished: Variable,
               lengths: Variable) -> None:
        for value, var in zip(inputs + states + [finished, lengths],
                              self.inputs[1] + self.states[1] + [self.finished, self.lengths]):
            assign(value, output=var)


def _step(decoder: Any, carried: _Carried, time: Variable, impute: bool,
          kwargs: dict) -> tuple[Any, list[Variable]]:
    """One step, traced into the loop's body: returns the outputs (structure, vars) and
    writes the carried vars."""
    inputs, states = carried.current()
    outputs, next_states, next_inputs, next_finished = decoder.step(time, inputs, states,
                                                                    **kwargs)
    what = f"{type(decoder).__name__}.step"
    news = check_states("dynamic_decode", carried.states, next_states, what)
    next_ins = check_states("dynamic_decode", carried.inputs, next_inputs,
                            f"{what} (its next inputs)")
    finished = carried.finished
    next_done = _finished(next_finished, f"dynamic_decode: what {what} returns as finished")
    if getattr(decoder, "tracks_own_finished", False):
        lengths = getattr(next_states, "lengths", carried.lengths)
    else:
        next_done = logical_or(next_done, finished)
        lengths = carried.lengths + cast(logical_not(finished), "int64")
        if impute:
            news = [_impute(finished, old, new) for old, new in zip(carried.states[1], news)]
    carried.update(next_ins, news, next_done, lengths)
    structure, outs = flatten(outputs, f"dynamic_decode: the outputs {what} returns")
    return structure, outs


def dynamic_decode(decoder: Any, inits: Any = None, max_step_num: int | None = None,
                   output_time_major: bool = False, impute_finished: bool = False,
                   is_test: bool = False, return_length: bool = False, **kwargs: Any
                   ) -> tuple[Any, ...]:
    """Run ``decoder`` one step at a time in a `While` loop until every sequence has
    finished or the step count passes ``max_step_num`` (as in Paddle, at most
    ``max_step_num + 1`` steps; required for a decoder that stops at an end token only).

    Returns ``(final_outputs, final_states)``, with ``return_length`` also each
    sequence's length (int64, ``finished``'s shape: the steps up to and including the
    one that finished it). ``final_outputs`` stacks each step's outputs ``[batch, T,
    ...]`` (``[T, batch, ...]`` with ``output_time_major``), as the decoder's
    ``finalize`` revises them; ``final_states`` are the states after the last step.
    ``impute_finished`` keeps a finished sequence's states as they were when it finished.
    ``is_test`` keeps nothing for a gradient. Other keyword arguments go to
    ``decoder.step`` (and on to the cell) at every step.
    """
    limit = _max_steps(decoder, max_step_num)
    impute = check_bool(impute_finished, "impute_finished", "dynamic_decode")
    if callable(getattr(decoder, "set_max_steps", None)):
        decoder.set_max_steps(None if limit is None else limit + 1)
    initial_inputs, initial_states, initial_finished = decoder.initialize(inits)
    finished = _finished(initial_finished, f"dynamic_decode: the finished flags "
                                           f"{type(decoder).__name__}.initialize returns")
    ops = LayerOps("dynamic_decode")
    carried = _Carried(ops, initial_inputs, initial_states, finished)
    time = ops.constant([1], "int64", 0)
    cond = ops.not_all(carried.finished)
    bound = None if limit is None else ops.constant([1], "int64", limit)
    parent = ops.helper.trace.block
    loop = While(cond, is_test=check_bool(is_test, "is_test", "dynamic_decode"))
    with loop.block():
        structure, outs = _step(decoder, carried, time, impute, kwargs)
        dtypes = [o.dtype for o in outs]
        with ops.helper.trace.in_block(parent):   # the arrays live around the loop
            arrays = [ops.array(d) for d in dtypes]
        for o, array in zip(outs, arrays):
            array_write(o, time, array=array)
        increment(time, 1.0, in_place=True)
        going = ops.not_all(carried.finished)
        if bound is None:
            assign(going, output=cond)
        else:
            logical_and(going, less_equal(time, bound), out=cond)
    stacked = [ops.stacked(a) for a in arrays]
    final_outputs, final_states = pack(structure, stacked), pack(*carried.states)
    try:
        final_outputs, final_states = decoder.finalize(final_outputs, final_states,
                                                       carried.lengths)
    except NotImplementedError:
        pass
    if not output_time_major:
        out_structure, vs = flatten(final_outputs, "dynamic_decode: the final outputs")
        final_outputs = pack(out_structure, [ops.swap_batch_time(v) for v in vs])
    result = (final_outputs, final_states)
    return result + (carried.lengths,) if return_length else result
