"""`BeamSearchDecoder`: beam search over the outputs of an `RNNCell`, run by
`dynamic_decode` (Paddle 1.8's, with a length penalty and early stopping besides)::

    enc = fluid.layers.BeamSearchDecoder.tile_beam_merge_with_batch(encoder_out, 4)
    decoder = fluid.layers.BeamSearchDecoder(cell, start_token=0, end_token=1, beam_size=4,
                                             embedding_fn=embed, output_fn=project)
    ids, states = fluid.layers.dynamic_decode(decoder, inits=state, max_step_num=30,
                                              encoder_output=enc)   # ids [B, T, beam]

Each step: the cell runs on ``[batch * beam, ...]`` (its states and inputs are tiled);
scores are log-softmax log-probabilities added to each beam's; a finished beam offers only
``end_token``, at no cost; the ``beam_size`` best of ``beam x vocab`` candidates of each
batch row go on (`topk`); the states follow the beams they extend (`gather`). After the
last step `gather_tree` traces each final beam back. docs/decoding.md has the rules.
"""
from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .activations import log_softmax
from .compare import equal, greater_equal, logical_not, logical_or
from .decode import Decoder
from .decode_helpers import check_fn, embedded
from .grouped import LayerOps
from .helpers import LayerHelper, as_variable
from .index import check_bool, check_int, gather, gather_tree, index_sample, topk
from .math import elementwise_floordiv, elementwise_mod
from .rnn_loop import check_cell, check_states
from .structure import flatten, pack
from .tensor import (
    assign,
    cast,
    fill_constant,
    reduce_max,
    reshape,
    unsqueeze,
)

__all__ = ["BeamSearchDecoder"]

_KINF = 1e9   # the score of a beam that must not be chosen (Paddle's)


class BeamSearchDecoder(Decoder):
    """Beam search over the outputs of ``cell`` (a `Decoder` for `dynamic_decode`).

    ``start_token``/``end_token``: ids of the vocabulary (the logits' last dim), which
    must hold at least ``beam_size`` ids. ``embedding_fn`` maps the chosen ids
    ``[batch, beam]`` to the cell's next inputs ``[batch, beam, ...]`` (e.g.
    `fluid.embedding`; None: the ids themselves); ``output_fn`` maps the cell's outputs
    ``[batch, beam, hidden]`` to logits ``[batch, beam, vocab]`` (e.g. an `fc` with
    ``num_flatten_dims=2``). A var of ``[batch, ...]`` the cell reads besides (an encoder's
    outputs) is tiled first with `tile_beam_merge_with_batch`.

    Beyond Paddle, which left both as TODOs: ``length_penalty`` (alpha >= 0) ranks
    hypotheses by ``log_prob / ((5 + length) / 6) ** alpha`` (GNMT; 0: by log_prob,
    Paddle's rule), and ``early_stopping`` finishes a batch row once its best finished
    hypothesis can no longer be beaten by an unfinished one (its log-probability can only
    fall, and with a penalty its length is at most ``max_step_num + 1``): the row's other
    hypotheses stop where they are.

    `dynamic_decode` returns the ids ``[batch, T, beam]`` (beam 0 the best) and the final
    ``StateWrapper(cell_states, log_probs, finished, lengths)``, each ``[batch, beam,
    ...]``: ``log_probs`` the hypotheses' log-probabilities, ``lengths`` their lengths
    (the end token included).
    """

    OutputWrapper = collections.namedtuple("OutputWrapper",
                                           ("scores", "predicted_ids", "parent_ids"))
    StateWrapper = collections.namedtuple("StateWrapper",
                                          ("cell_states", "log_probs", "finished", "lengths"))
    may_run_forever = True
    tracks_own_finished = True

    def __init__(self, cell: Any, start_token: int, end_token: int, beam_size: int,
                 embedding_fn: Callable | None = None, output_fn: Callable | None = None,
                 length_penalty: float = 0.0, early_stopping: bool = False):
        layer = "BeamSearchDecoder"
        check_cell(cell, layer)
        self.cell = cell
        self.start_token = check_int(start_token, "start_token", layer, minimum=0)
        self.end_token = check_int(end_token, "end_token", layer, minimum=0)
        self.beam_size = check_int(beam_size, "beam_size", layer, minimum=1)
        self.embedding_fn = check_fn(embedding_fn, "embedding_fn", layer)
        self.output_fn = check_fn(output_fn, "output_fn", layer)
        if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) \
                or length_penalty < 0:
            raise error_at(OpArgumentError, f"{layer}: length_penalty must be a number >= 0 "
                                            f"(GNMT's alpha), got {length_penalty!r:.40}")
        self.length_penalty = float(length_penalty)
        self.early_stopping = check_bool(early_stopping, "early_stopping", layer)
        self._longest: int | None = None
        self._ops = LayerOps("beam_search_decoder")

    @staticmethod
    def tile_beam_merge_with_batch(x: Variable, beam_size: int) -> Variable:
        """``x`` ``[batch, ...]`` -> ``[batch * beam_size, ...]``: each row repeated
        ``beam_size`` times, next to each other (rows ``b * beam_size + j``)."""
        x = as_variable(x, "BeamSearchDecoder.tile_beam_merge_with_batch: x")
        beam = check_int(beam_size, "beam_size", "tile_beam_merge_with_batch", minimum=1)
        ops = LayerOps("tile_beam")
        return ops.reshape_like(ops.tile_beams(x, beam), [-1], x, 1)

    def set_max_steps(self, steps: int | None) -> None:
        self._longest = steps

    def _merge(self, x: Variable) -> Variable:
        return self._ops.reshape_like(x, [-1], x, 2)

    def _split(self, x: Variable) -> Variable:
        return self._ops.reshape_like(x, [-1, self.beam_size], x, 1)

    def initialize(self, initial_cell_states: Any) -> tuple[Any, Any, Variable]:
        """The start tokens ``[batch, beam]`` (embedded), the states tiled to ``[batch,
        beam, ...]``, beam 0 of each row at log-probability 0 and the others at -1e9 (so
        that the copies do not compete at the first step), nothing finished."""
        structure, states = flatten(initial_cell_states,
                                    "BeamSearchDecoder.initialize: initial_cell_states")
        ref, beam, ops = states[0], self.beam_size, LayerOps("beam_search_decoder")
        self._ops = ops
        self._dtype = ref.dtype if ref.dtype in ("float32", "float64") else "float32"
        cell_states = pack(structure, [ops.tile_beams(s, beam) for s in states])
        start = ops.fill_like_batch(ref, [-1, beam], "int64", self.start_token)
        first = ops.op("assign_value", {}, {"shape": [beam], "dtype": self._dtype,
                                            "values": [0.0] + [-_KINF] * (beam - 1)})
        log_probs = ops.op("elementwise_add", {
            "X": ops.fill_like_batch(ref, [-1, beam], self._dtype, 0.0), "Y": first})
        finished = ops.fill_like_batch(ref, [-1, beam], "bool", False)
        lengths = ops.fill_like_batch(ref, [-1, beam], "int64", 0)
        # [batch, 1]: b * beam, the first row of each batch row's beams
        self._row_starts = ops.op("cumsum", {"X": ops.fill_like_batch(ref, [-1, 1], "int64",
                                                                       beam)},
                                  {"axis": 0, "exclusive": True})
        inputs = embedded(self.embedding_fn, start, "BeamSearchDecoder") \
            if self.embedding_fn is not None else start
        return inputs, self.StateWrapper(cell_states, log_probs, finished, lengths), finished

    def step(self, time: Variable, inputs: Any, states: Any, **kwargs: Any
             ) -> tuple[Any, Any, Any, Variable]:
        in_structure, ins = flatten(inputs, "BeamSearchDecoder.step: inputs")
        structure, cells = flatten(states.cell_states, "BeamSearchDecoder.step: cell_states")
        merged = [self._merge(c) for c in cells]
        outputs, next_states = self.cell(pack(in_structure, [self._merge(v) for v in ins]),
                                         pack(structure, merged), **kwargs)
        news = check_states("BeamSearchDecoder", (structure, merged), next_states, "cell.call")
        out_structure, outs = flatten(outputs, "BeamSearchDecoder: the cell's outputs")
        logits = pack(out_structure, [self._split(o) for o in outs])
        if self.output_fn is not None:
            logits = self.output_fn(logits)
        next_cells = pack(structure, [self._split(n) for n in news])
        output, state = self._search(self._logits(logits), next_cells, states)
        ids = output.predicted_ids
        next_inputs = embedded(self.embedding_fn, ids, "BeamSearchDecoder") \
            if self.embedding_fn is not None else ids
        return output, state, next_inputs, state.finished

    def _logits(self, value: Any) -> Variable:
        """The logits ``[batch, beam, vocab]``, checked against the decoder's ids."""
        layer = "BeamSearchDecoder"
        logits = as_variable(value, f"{layer}: the logits (the cell's outputs after "
                                    f"output_fn)")
        vocab = logits.shape[-1] if len(logits.shape) == 3 else -1
        if len(logits.shape) != 3 or logits.shape[1] not in (self.beam_size, -1) or vocab < 0:
            raise error_at(ShapeError, f"{layer}: the logits {logits.name}:"
                                       f"{short_type(logits.desc)} must be [batch, "
                                       f"beam_size={self.beam_size}, vocab] with vocab known; "
                                       f"give an output_fn that projects the cell's outputs")
        if self.beam_size > vocab:
            raise error_at(OpArgumentError, f"{layer}: beam_size={self.beam_size} is larger "
                                            f"than the vocabulary of {vocab} ids (the logits "
                                            f"{logits.name}:{short_type(logits.desc)})")
        for what, token in (("end_token", self.end_token), ("start_token", self.start_token)):
            if token >= vocab:
                raise error_at(OpArgumentError, f"{layer}: {what}={token} is outside the "
                                                f"vocabulary of {vocab} ids (the logits "
                                                f"{logits.name}:{short_type(logits.desc)})")
        return logits

    def _penalty(self, lengths: Variable | float) -> Any:
        return ((lengths + 5.0) / 6.0) ** self.length_penalty

    def _scores(self, logits: Variable, state: Any) -> tuple[Variable, Variable]:
        """Each candidate's log-probability and score ``[batch, beam, vocab]``: a finished
        beam offers the end token alone, at its own log-probability."""
        vocab = logits.shape[-1]
        step = log_softmax(logits)
        only_end = np.full((1, 1, vocab), -_KINF, step.dtype)
        only_end[0, 0, self.end_token] = 0.0
        going = unsqueeze(logical_not(state.finished), [2])
        step = LayerHelper("beam_search").append_one(
            "where", {"Condition": going, "X": step, "Y": assign(only_end)}, final=False)
        log_probs = step + unsqueeze(state.log_probs, [2])
        if not self.length_penalty:
            return log_probs, log_probs
        lengths = state.lengths + cast(logical_not(state.finished), "int64")
        return log_probs, log_probs / unsqueeze(self._penalty(cast(lengths, step.dtype)), [2])

    def _gather(self, x: Variable, rows: Variable) -> Variable:
        """``x`` ``[batch, beam, ...]`` with each row's beams taken from ``rows`` (rows of
        ``[batch * beam, ...]``)."""
        return self._split(gather(self._merge(x), rows))

    def _search(self, logits: Variable, next_cells: Any, state: Any) -> tuple[Any, Any]:
        beam, vocab = self.beam_size, logits.shape[-1]
        log_probs, scores = self._scores(logits, state)
        top_scores, top = topk(reshape(scores, [-1, beam * vocab]), beam)
        size = fill_constant([1], "int64", vocab)
        parents, tokens = elementwise_floordiv(top, size), elementwise_mod(top, size)
        next_log_probs = index_sample(reshape(log_probs, [-1, beam * vocab]), top)
        rows = reshape(parents + self._row_starts, [-1])
        structure, cells = flatten(next_cells, "BeamSearchDecoder: cell_states")
        cells = [self._gather(c, rows) for c in cells]
        was_finished = self._gather(state.finished, rows)
        lengths = self._gather(state.lengths, rows) + cast(logical_not(was_finished), "int64")
        finished = logical_or(was_finished,
                              equal(tokens, fill_constant([1], "int64", self.end_token)))
        if self.early_stopping:
            finished = self._stop_early(finished, top_scores, next_log_probs)
        for v in (tokens, parents, finished, lengths):
            v.stop_gradient = True
        return (self.OutputWrapper(top_scores, tokens, parents),
                self.StateWrapper(pack(structure, cells), next_log_probs, finished, lengths))

    def _stop_early(self, finished: Variable, scores: Variable, log_probs: Variable
                    ) -> Variable:
        """``finished``, and every beam of a row whose best finished hypothesis scores at
        least what its best unfinished one could still reach."""
        helper = LayerHelper("beam_search")
        lowest = fill_constant([1, 1], scores.dtype, -np.inf)
        reach = log_probs
        if self.length_penalty:
            if self._longest is None:
                raise error_at(OpArgumentError, "BeamSearchDecoder: early_stopping with a "
                                                "length_penalty needs dynamic_decode's "
                                                "max_step_num")
            reach = log_probs * (1.0 / self._penalty(float(self._longest)))
        done = helper.append_one("where", {"Condition": finished, "X": scores, "Y": lowest},
                                 final=False)
        going = helper.append_one("where", {"Condition": logical_not(finished), "X": reach,
                                            "Y": lowest}, final=False)
        row_done = greater_equal(reduce_max(done, dim=1, keep_dim=True),
                                 reduce_max(going, dim=1, keep_dim=True))
        return logical_or(finished, row_done)

    def finalize(self, outputs: Any, final_states: Any, sequence_lengths: Variable
                 ) -> tuple[Variable, Any]:
        """Each final beam's ids, traced back through the parents: ``[T, batch, beam]``."""
        return gather_tree(outputs.predicted_ids, outputs.parent_ids), final_states
