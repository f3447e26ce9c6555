"""`BasicDecoder` and the helpers that say where its next input comes from (Paddle 1.8's
`DecodeHelper`, `TrainingHelper`, `GreedyEmbeddingHelper`, `SampleEmbeddingHelper`)::

    helper = fluid.layers.TrainingHelper(target_embeddings, target_lengths)   # teacher forcing
    helper = fluid.layers.GreedyEmbeddingHelper(embed, start_tokens, end_token=1)  # argmax
    decoder = fluid.layers.BasicDecoder(cell, helper, output_fn=project)
    outputs, states = fluid.layers.dynamic_decode(decoder, inits=encoder_state,
                                                  max_step_num=30)
    logits, ids = outputs.cell_outputs, outputs.sample_ids       # [batch, T, ...]
"""
from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .activations import softmax
from .compare import equal, less_equal
from .decode import Decoder
from .helpers import as_variable
from .index import check_int, gather
from .metric import argmax
from .norm import pad
from .random import sampling_id
from .rnn_loop import check_cell, lengths_var
from .structure import flatten, pack
from .tensor import cast, fill_constant, fill_constant_batch_size_like, squeeze, transpose

__all__ = ["DecodeHelper", "TrainingHelper", "GreedyEmbeddingHelper",
           "SampleEmbeddingHelper", "BasicDecoder"]


class DecodeHelper:
    """How a `BasicDecoder` starts, picks its ids and makes its next inputs."""

    #: Whether decoding may never finish (it stops at an end token only).
    may_run_forever = False

    def initialize(self) -> tuple[Any, Variable]:
        """``(initial_inputs, initial_finished)``: the first step's inputs ``[batch, ...]``
        and a bool ``[batch]`` flag per sequence."""
        raise NotImplementedError(f"{type(self).__name__} must define initialize()")

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        """The ids picked from ``outputs`` (the step's logits ``[batch, vocab]``)."""
        raise NotImplementedError(f"{type(self).__name__} must define sample(time, outputs, "
                                  f"states)")

    def next_inputs(self, time: Variable, outputs: Variable, states: Any,
                    sample_ids: Variable) -> tuple[Variable, Any, Any]:
        """``(finished, next_inputs, next_states)`` after step ``time``."""
        raise NotImplementedError(f"{type(self).__name__} must define next_inputs(time, "
                                  f"outputs, states, sample_ids)")


def embedded(fn: Callable[[Variable], Any], ids: Variable, layer: str) -> Any:
    """``fn(ids)``, checked: each var it gives has ``ids``' dims and more."""
    got = fn(ids)
    _, vs = flatten(got, f"{layer}: what embedding_fn returns")
    for v in vs:
        if len(v.shape) <= len(ids.shape) or any(a >= 0 and b >= 0 and a != b
                                          for a, b in zip(v.shape, ids.shape)):
            raise error_at(ShapeError, f"{layer}: embedding_fn turns the ids {ids.name}:"
                                       f"{short_type(ids.desc)} into {v.name}:"
                                       f"{short_type(v.desc)}; it must keep the ids' dims and "
                                       f"add the embedding's (fluid.embedding does; "
                                       f"fluid.layers.embedding wants ids [..., 1])")
    return got


def check_fn(fn: Any, what: str, layer: str) -> Any:
    if fn is not None and not callable(fn):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a function of a Variable "
                                        f"(or None), got {type(fn).__name__}")
    return fn


class TrainingHelper(DecodeHelper):
    """Teacher forcing: step t's input is ``inputs[:, t]`` (the true previous tokens,
    embedded), whatever the decoder predicted; a sequence finishes at its length.
    ``inputs``: a var (or a structure of them) ``[batch, T, ...]`` (``[T, batch, ...]``
    with ``time_major``); ``sequence_length``: int64 ``[batch]``. ``sample`` is the
    argmax of the logits."""

    def __init__(self, inputs: Any, sequence_length: Variable, time_major: bool = False):
        self.inputs = inputs
        self.sequence_length = lengths_var(sequence_length, "TrainingHelper")
        self.time_major = bool(time_major)
        structure, vs = flatten(inputs, "TrainingHelper: inputs")
        steps = []
        for v in vs:
            if len(v.shape) < 2:
                raise error_at(ShapeError, f"TrainingHelper: inputs {v.name}:"
                                           f"{short_type(v.desc)} must be [batch, T, ...]")
            tm = v if time_major else transpose(v, [1, 0] + list(range(2, len(v.shape))))
            # one step more, so that the step after the last has an input to read
            steps.append(pad(tm, [0, 1] + [0, 0] * (len(v.shape) - 1)))
        self._structure, self._steps = structure, steps

    def _at(self, index: Variable) -> Any:
        return pack(self._structure, [squeeze(gather(s, index), [0]) for s in self._steps])

    def initialize(self) -> tuple[Any, Variable]:
        zero = fill_constant([1], self.sequence_length.dtype, 0)
        finished = equal(self.sequence_length, zero)
        return self._at(fill_constant([1], "int64", 0)), finished

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        return argmax(outputs, axis=-1)

    def next_inputs(self, time: Variable, outputs: Variable, states: Any,
                    sample_ids: Variable) -> tuple[Variable, Any, Any]:
        next_time = time + 1
        finished = less_equal(self.sequence_length, cast(next_time, self.sequence_length.dtype))
        return finished, self._at(next_time), states


class GreedyEmbeddingHelper(DecodeHelper):
    """Greedy decoding: the next input is ``embedding_fn`` of the argmax of the logits; a
    sequence finishes when it gives ``end_token``. ``start_tokens``: int64 ``[batch]``;
    ``embedding_fn`` maps ids ``[batch]`` to ``[batch, ...]`` (e.g. `fluid.embedding`)."""

    may_run_forever = True

    def __init__(self, embedding_fn: Callable[[Variable], Any], start_tokens: Variable,
                 end_token: int):
        self._layer = type(self).__name__
        if not callable(embedding_fn):
            raise error_at(OpArgumentError, f"{self._layer}: embedding_fn must be a function "
                                            f"of the ids (e.g. lambda ids: fluid.embedding("
                                            f"ids, size=[vocab, dim]))")
        self.embedding_fn = embedding_fn
        self.start_tokens = as_variable(start_tokens, f"{self._layer}: start_tokens")
        if self.start_tokens.dtype not in ("int32", "int64") or \
                len(self.start_tokens.shape) != 1:
            raise error_at(OpArgumentError, f"{self._layer}: start_tokens must be an int64 "
                                            f"vector [batch], got {self.start_tokens.name}:"
                                            f"{short_type(self.start_tokens.desc)}")
        self.end_id = check_int(end_token, "end_token", self._layer, minimum=0)
        self.end_token = fill_constant([1], "int64", self.end_id)

    def initialize(self) -> tuple[Any, Variable]:
        finished = fill_constant_batch_size_like(self.start_tokens, [-1], "bool", False)
        return embedded(self.embedding_fn, self.start_tokens, self._layer), finished

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        self._check_vocabulary(outputs)
        return argmax(outputs, axis=-1)

    def _check_vocabulary(self, outputs: Variable) -> None:
        vocab = outputs.shape[-1] if outputs.shape else -1
        if len(outputs.shape) != 2:
            raise error_at(ShapeError, f"{self._layer}: the logits {outputs.name}:"
                                       f"{short_type(outputs.desc)} must be [batch, vocab]")
        if vocab >= 0 and self.end_id >= vocab:
            raise error_at(OpArgumentError, f"{self._layer}: end_token={self.end_id} is "
                                            f"outside the vocabulary of {vocab} ids (the "
                                            f"logits {outputs.name}:"
                                            f"{short_type(outputs.desc)})")

    def next_inputs(self, time: Variable, outputs: Variable, states: Any,
                    sample_ids: Variable) -> tuple[Variable, Any, Any]:
        finished = equal(sample_ids, self.end_token)
        return finished, embedded(self.embedding_fn, sample_ids, self._layer), states


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """`GreedyEmbeddingHelper` that draws the next id from ``softmax(logits /
    softmax_temperature)`` instead of taking the argmax (``seed``: the draws' seed, None
    for the program's)."""

    def __init__(self, embedding_fn: Callable[[Variable], Any], start_tokens: Variable,
                 end_token: int, softmax_temperature: float | None = None,
                 seed: int | None = None):
        super().__init__(embedding_fn, start_tokens, end_token)
        if softmax_temperature is not None and (
                isinstance(softmax_temperature, bool) or
                not isinstance(softmax_temperature, (int, float)) or softmax_temperature <= 0):
            raise error_at(OpArgumentError, f"SampleEmbeddingHelper: softmax_temperature must "
                                            f"be a number above 0, got "
                                            f"{softmax_temperature!r:.40}")
        self.softmax_temperature = softmax_temperature
        self.seed = 0 if seed is None else check_int(seed, "seed", "SampleEmbeddingHelper")

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        self._check_vocabulary(outputs)
        logits = outputs if self.softmax_temperature is None else \
            outputs * (1.0 / self.softmax_temperature)
        probs = softmax(logits)
        probs.stop_gradient = True
        return sampling_id(probs, seed=self.seed, dtype=self.start_tokens.dtype)


class BasicDecoder(Decoder):
    """A cell and a `DecodeHelper`: each step runs ``cell``, applies ``output_fn`` (e.g.
    the projection to the vocabulary), lets the helper pick ids and make the next
    inputs. Its outputs are ``OutputWrapper(cell_outputs, sample_ids)``."""

    OutputWrapper = collections.namedtuple("OutputWrapper", ("cell_outputs", "sample_ids"))

    def __init__(self, cell: Any, helper: DecodeHelper, output_fn: Callable | None = None):
        check_cell(cell, "BasicDecoder")
        if not all(callable(getattr(helper, m, None))
                   for m in ("initialize", "sample", "next_inputs")):
            raise error_at(OpArgumentError, f"BasicDecoder: helper must be a DecodeHelper, "
                                            f"got {type(helper).__name__}")
        self.cell, self.helper = cell, helper
        self.output_fn = check_fn(output_fn, "output_fn", "BasicDecoder")
        self.may_run_forever = bool(getattr(helper, "may_run_forever", False))

    def initialize(self, initial_cell_states: Any) -> tuple[Any, Any, Variable]:
        initial_inputs, initial_finished = self.helper.initialize()
        return initial_inputs, initial_cell_states, initial_finished

    def step(self, time: Variable, inputs: Any, states: Any, **kwargs: Any
             ) -> tuple[Any, Any, Any, Variable]:
        cell_outputs, cell_states = self.cell(inputs, states, **kwargs)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        sample_ids = self.helper.sample(time=time, outputs=cell_outputs, states=cell_states)
        sample_ids.stop_gradient = True
        finished, next_inputs, next_states = self.helper.next_inputs(
            time=time, outputs=cell_outputs, states=cell_states, sample_ids=sample_ids)
        return (self.OutputWrapper(cell_outputs, sample_ids), next_states, next_inputs,
                finished)
