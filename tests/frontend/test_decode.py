"""BeamSearchDecoder and BasicDecoder through dynamic_decode, over a cell written by hand:
beam search gives exactly what an independent NumPy beam search gives (ids, and
log-probabilities to 1e-9 in float64) at beam sizes 1, 2 and 4, with a length penalty and
with early stopping; beam 1 is greedy decoding; a beam as wide as every hypothesis finds
the exhaustive best; a padded batch decodes as each of its rows alone; teacher forcing
through dynamic_decode is rnn, and its gradients agree with finite differences; mistakes
are errors at the user's line."""
import numpy as np
import pytest
from ops.harness import check_block

import fluid

from .decode_reference import beam_search, exhaustive

L = fluid.layers
V, H, D = 7, 5, 3
START, END = 0, 1
P_ATTRS = {"wx": [D, H], "wh": [H, H], "bh": [H], "emb": [V, D], "wo": [H, V], "bo": [V]}


class Cell(L.RNNCell):
    """h' = tanh(x @ wx + h @ wh + bh); its output is h'."""

    def call(self, inputs, states):
        h = L.tanh(L.fc(inputs, H, param_attr="wx", bias_attr=False) +
                   L.fc(states, H, param_attr="wh", bias_attr="bh"))
        return h, h

    @property
    def state_shape(self):
        return [H]


def embed(ids):
    return fluid.embedding(ids, size=[V, D], param_attr="emb", dtype="float64")


def project(x):
    return L.fc(x, V, num_flatten_dims=len(x.shape) - 1, param_attr="wo", bias_attr="bo")


def _h0():
    return L.data("h0", shape=[H], dtype="float64")


def _beam(beam, max_step_num=6, **options):
    decoder = L.BeamSearchDecoder(Cell(), START, END, beam, embedding_fn=embed,
                                  output_fn=project, **options)
    ids, states = L.dynamic_decode(decoder, inits=_h0(), max_step_num=max_step_num,
                                   is_test=True)
    return ids, states.log_probs, states.lengths, states.finished


def _greedy(max_step_num=6):
    h0 = _h0()
    start = L.fill_constant_batch_size_like(h0, [-1], "int64", START)
    decoder = L.BasicDecoder(Cell(), L.GreedyEmbeddingHelper(embed, start, END),
                             output_fn=project)
    out, _, lengths = L.dynamic_decode(decoder, inits=h0, max_step_num=max_step_num,
                                       return_length=True)
    return out.sample_ids, lengths


def _program(**methods):
    """A program whose methods (taking h0) return what each function builds."""
    return type("Decoding", (fluid.Program,), {
        name: fluid.network("h0")(lambda self, h0, build=build: build())
        for name, build in methods.items()})().Compile(seed=0)


def _params(prog, rng):
    """The cell's parameters, the output bias spread so that the end token comes often."""
    p = {k: prog.get_var(k) for k in P_ATTRS if k in prog.parameters()}
    p["bo"] = rng.uniform(-1, 1, V)
    p["wo"] = p["wo"] * 2.0
    for k, v in p.items():
        prog.set_var(k, v)
    return p


def _check(got, want):
    ids, log_probs, lengths, finished = got
    w_ids, w_log_probs, w_lengths, w_finished = want
    np.testing.assert_array_equal(ids, w_ids)
    np.testing.assert_allclose(log_probs, w_log_probs, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(lengths, w_lengths)
    np.testing.assert_array_equal(finished, w_finished)


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_beam_search_is_the_numpy_beam_search(beam, rng):
    prog = _program(decode=lambda: _beam(beam))
    p = _params(prog, rng)
    h0 = rng.standard_normal((5, H))
    got = prog.decode(h0)
    want = beam_search(p, h0, beam, 6)
    _check(got, want)
    assert got[0].shape[1] <= 7 and got[2].min() >= 1
    assert got[3].any() and (got[2] < got[0].shape[1]).any()   # some ended early


@pytest.mark.parametrize("alpha,early", [(0.8, False), (0.0, True), (0.6, True)])
def test_length_penalty_and_early_stopping_are_the_numpy_rules(alpha, early, rng):
    prog = _program(decode=lambda: _beam(4, 9, length_penalty=alpha, early_stopping=early))
    p = _params(prog, rng)
    h0 = rng.standard_normal((6, H))
    _check(prog.decode(h0), beam_search(p, h0, 4, 9, alpha=alpha, early=early))


def test_early_stopping_keeps_the_best_hypothesis_and_stops_sooner(rng):
    prog = _program(full=lambda: _beam(3, 12), early=lambda: _beam(3, 12, early_stopping=True))
    _params(prog, rng)
    h0 = rng.standard_normal((8, H))
    full, early = prog.full(h0), prog.early(h0)
    assert early[0].shape[1] < full[0].shape[1]
    np.testing.assert_allclose(early[1][:, 0], full[1][:, 0], rtol=1e-12)
    np.testing.assert_array_equal(early[2][:, 0], full[2][:, 0])
    for b, n in enumerate(full[2][:, 0]):
        np.testing.assert_array_equal(early[0][b, :n, 0], full[0][b, :n, 0])


def test_beam_one_is_greedy_decoding(rng):
    prog = _program(beam=lambda: _beam(1), greedy=_greedy)
    _params(prog, rng)
    h0 = rng.standard_normal((6, H))
    ids, _, lengths, _ = prog.beam(h0)
    greedy_ids, greedy_lengths = prog.greedy(h0)
    np.testing.assert_array_equal(lengths[:, 0], greedy_lengths)
    assert ids.shape[1] == greedy_ids.shape[1]
    for b, n in enumerate(greedy_lengths):
        np.testing.assert_array_equal(ids[b, :n, 0], greedy_ids[b, :n])


def test_a_beam_as_wide_as_every_hypothesis_finds_the_exhaustive_best(rng):
    """Three ids and two steps: the beam of three holds every first step, so its last
    step chooses among all hypotheses (2 x 3 of two ids, and the end alone)."""
    global V
    saved, V = V, 3
    try:
        prog = _program(decode=lambda: _beam(3, max_step_num=1))
        p = _params(prog, rng)
        h0 = rng.standard_normal((4, H))
        ids, log_probs, lengths, _ = prog.decode(h0)
    finally:
        V = saved
    for b, best in enumerate(exhaustive(p, h0)):
        for j, (score, hypothesis) in enumerate(best[:3]):
            assert lengths[b, j] == len(hypothesis)
            np.testing.assert_array_equal(ids[b, :len(hypothesis), j], hypothesis)
            np.testing.assert_allclose(log_probs[b, j], score, rtol=1e-12)


class AttentionCell(L.RNNCell):
    """A GRU step whose input is joined by an attention read of the encoder's outputs
    (masked past each source's length): what a translation decoder does."""

    def __init__(self):
        self.gru = L.GRUCell(H, dtype="float64", name="dec")

    def call(self, inputs, states, memory, bias):
        query = L.unsqueeze(L.fc(states, H, param_attr="att.q", bias_attr=False), [1])
        weights = L.softmax(L.matmul(query, memory, transpose_y=True) + bias)   # [N, 1, S]
        read = L.squeeze(L.matmul(weights, memory), [1])
        return self.gru(L.concat([inputs, read], axis=1), states)


class Translate(fluid.Program):
    """An encoder (GRU over padded source ids with lengths) and a beam-search decoder
    with attention."""

    @fluid.network("src", "n")
    def decode(self, src, n):
        src = L.data("src", shape=[-1, -1], dtype="int64", append_batch_size=False)
        n = L.data("n", shape=[-1], dtype="int64", append_batch_size=False)
        memory, state = L.rnn(L.GRUCell(H, dtype="float64", name="enc"),
                              fluid.embedding(src, [V, D], param_attr="src_emb",
                                              dtype="float64"), sequence_length=n)
        bias = L.unsqueeze((L.sequence_mask(n, maxlen=L.shape(src)[1:2], dtype="float64")
                            - 1.0) * 1e9, [1])
        tile = L.BeamSearchDecoder.tile_beam_merge_with_batch
        decoder = L.BeamSearchDecoder(AttentionCell(), START, END, 3, embedding_fn=embed,
                                      output_fn=project)
        ids, states = L.dynamic_decode(decoder, inits=state, max_step_num=8,
                                       memory=tile(memory, 3), bias=tile(bias, 3))
        return ids, states.log_probs, states.lengths


def test_a_padded_batch_decodes_as_each_row_alone(rng):
    prog = Translate().Compile(seed=0)
    _params(prog, rng)
    n = np.array([4, 1, 6, 3], np.int64)
    src = rng.integers(2, V, (4, 6))
    src[np.arange(6)[None, :] >= n[:, None]] = rng.integers(0, V, (n.size * 6 - n.sum()))
    ids, log_probs, lengths = prog.decode(src, n)
    for b in range(4):
        one_ids, one_log_probs, one_lengths = prog.decode(src[b:b + 1, :n[b]], n[b:b + 1])
        np.testing.assert_array_equal(one_lengths[0], lengths[b])
        np.testing.assert_allclose(one_log_probs[0], log_probs[b], rtol=1e-12)
        for j, length in enumerate(lengths[b]):
            np.testing.assert_array_equal(one_ids[0, :length, j], ids[b, :length, j])


def _teacher_forcing():
    """A BasicDecoder with TrainingHelper, and rnn over the same inputs."""
    x = L.data("x", shape=[-1, -1, D], dtype="float64", append_batch_size=False,
               stop_gradient=False)
    n = L.data("n", shape=[-1], dtype="int64", append_batch_size=False)
    h0 = L.data("h0", shape=[-1, H], dtype="float64", append_batch_size=False,
                stop_gradient=False)
    decoder = L.BasicDecoder(Cell(), L.TrainingHelper(x, n), output_fn=project)
    out, last, lengths = L.dynamic_decode(decoder, inits=h0, impute_finished=True,
                                          return_length=True)
    hidden, final = L.rnn(Cell(), x, h0, sequence_length=n)
    return [out.cell_outputs, last, lengths, project(hidden), final]


def test_teacher_forcing_is_rnn_and_its_gradients_agree_with_finite_differences(rng):
    n = np.array([3, 1, 4], np.int64)
    feeds = {"x": rng.standard_normal((3, 4, D)), "n": n, "h0": rng.standard_normal((3, H))}
    logits, last, lengths, want_logits, want_last = check_block(
        _teacher_forcing, feeds, wrt=["x", "h0"], max_elements=20)
    np.testing.assert_array_equal(lengths, n)
    valid = np.arange(4)[None, :] < n[:, None]
    np.testing.assert_allclose(logits[valid], want_logits[valid], rtol=1e-12)
    np.testing.assert_allclose(last, want_last, rtol=1e-12)   # impute_finished keeps them


def test_sampling_draws_from_the_softmax_with_its_seed(rng):
    def sample(temperature, seed):
        h0 = _h0()
        start = L.fill_constant_batch_size_like(h0, [-1], "int64", START)
        helper = L.SampleEmbeddingHelper(embed, start, END, softmax_temperature=temperature,
                                         seed=seed)
        out, _, lengths = L.dynamic_decode(L.BasicDecoder(Cell(), helper, output_fn=project),
                                           inits=h0, max_step_num=6, return_length=True)
        return out.sample_ids, lengths
    prog = _program(cold=lambda: sample(1e-4, 3), hot=lambda: sample(1.0, 3),
                    again=lambda: sample(1.0, 3), greedy=_greedy)
    _params(prog, rng)
    h0 = rng.standard_normal((64, H))
    for got, want in zip(prog.cold(h0), prog.greedy(h0)):
        np.testing.assert_array_equal(got, want)
    hot, again = prog.hot(h0), prog.again(h0)
    assert (hot[0] >= 0).all() and (hot[0] < V).all()
    assert not np.array_equal(hot[0][:, :2], prog.greedy(h0)[0][:, :2])
    np.testing.assert_array_equal(hot[0], again[0])    # one seed, one stream


# --- errors --------------------------------------------------------------------------------

class WrongStates(Cell):
    def call(self, inputs, states):
        h, _ = super().call(inputs, states)
        return h, [h, h]


@pytest.mark.parametrize("build,error,match", [
    (lambda: _beam(8), fluid.OpArgumentError,
     r"beam_size=8 is larger than the vocabulary of 7 ids"),
    (lambda: L.dynamic_decode(L.BeamSearchDecoder(Cell(), START, 7, 2, embed, project),
                              inits=_h0(), max_step_num=3),
     fluid.OpArgumentError, r"end_token=7 is outside the vocabulary of 7 ids"),
    (lambda: L.dynamic_decode(L.BeamSearchDecoder(
        Cell(), START, END, 2, lambda ids: L.reshape(embed(ids), [-1, D]), project),
        inits=_h0(), max_step_num=3), fluid.ShapeError,
     r"embedding_fn turns the ids .*i64\[\?,2\] into .*f64\[\?,3\]; it must keep the ids' "
     r"dims and add the embedding's"),
    (lambda: L.dynamic_decode(L.BeamSearchDecoder(Cell(), START, END, 2, embed, project),
                              inits=_h0()), fluid.OpArgumentError,
     r"BeamSearchDecoder stops when every sequence gives its end token.*give max_step_num"),
    (lambda: L.dynamic_decode(L.BeamSearchDecoder(WrongStates(), START, END, 2, embed,
                                                  project), inits=_h0(), max_step_num=3),
     fluid.OpArgumentError, r"cell.call returns new states of another structure"),
    (lambda: L.dynamic_decode(L.BasicDecoder(Cell(), L.GreedyEmbeddingHelper(
        embed, L.fill_constant([2], "int64", 0), 9), project), inits=_h0(), max_step_num=3),
     fluid.OpArgumentError, r"GreedyEmbeddingHelper: end_token=9 is outside the vocabulary"),
    (lambda: L.BeamSearchDecoder(Cell(), START, END, 2, length_penalty=-1.0),
     fluid.OpArgumentError, r"length_penalty must be a number >= 0"),
])
def test_decoding_mistakes_are_errors_at_the_users_line(build, error, match):
    prog = type("P", (fluid.Program,), {
        "f": fluid.network("h0")(lambda self, h0: build()[0])})()
    with pytest.raises(error, match=rf"(?s){match}.*test_decode.py:\d+"):
        prog.Compile()


class Undone(L.Decoder):
    """A decoder that says nothing of finishing: its flags are floats."""

    def initialize(self, inits):
        return inits, inits, L.reduce_sum(inits, dim=1)

    def step(self, time, inputs, states):
        return inputs, states, inputs, L.reduce_sum(inputs, dim=1)


class NoStep(L.Decoder):
    def initialize(self, inits):
        return inits, inits, L.fill_constant_batch_size_like(inits, [-1], "bool", False)


def _direct_step():
    """A penalised early-stopping beam step outside dynamic_decode: no step limit known."""
    decoder = L.BeamSearchDecoder(Cell(), START, END, 2, embed, project, length_penalty=0.5,
                                  early_stopping=True)
    inputs, states, _ = decoder.initialize(_h0())
    return decoder.step(L.fill_constant([1], "int64", 0), inputs, states)


def _start():
    return L.fill_constant_batch_size_like(_h0(), [-1], "int64", START)


@pytest.mark.parametrize("build,error,match", [
    (lambda: [L.TrainingHelper(L.fill_constant([2], "float64", 0.0),
                               L.fill_constant([2], "int64", 1))], fluid.ShapeError,
     r"TrainingHelper: inputs .* must be \[batch, T, \.\.\.\]"),
    (lambda: L.GreedyEmbeddingHelper("embed", _start(), END), TypeError,
     r"GreedyEmbeddingHelper: embedding_fn must be a function of the ids"),
    (lambda: L.GreedyEmbeddingHelper(embed, _h0(), END), TypeError,
     r"GreedyEmbeddingHelper: start_tokens must be an int64 vector \[batch\]"),
    (lambda: L.SampleEmbeddingHelper(embed, _start(), END, softmax_temperature=0), TypeError,
     r"SampleEmbeddingHelper: softmax_temperature must be a number above 0"),
    (lambda: L.BasicDecoder(Cell(), object()), TypeError,
     r"BasicDecoder: helper must be a DecodeHelper"),
    (lambda: L.BasicDecoder(Cell(), L.GreedyEmbeddingHelper(embed, _start(), END),
                            output_fn="fc"), TypeError,
     r"BasicDecoder: output_fn must be a function of a Variable"),
    (lambda: L.dynamic_decode(L.BasicDecoder(Cell(), L.GreedyEmbeddingHelper(
        embed, _start(), END), output_fn=lambda x: L.unsqueeze(project(x), [1])),
        inits=_h0(), max_step_num=2), fluid.ShapeError,
     r"GreedyEmbeddingHelper: the logits .* must be \[batch, vocab\]"),
    (lambda: L.dynamic_decode(L.BeamSearchDecoder(
        Cell(), START, END, 2, embed, lambda x: L.reshape(project(x), [-1, V])),
        inits=_h0(), max_step_num=2), fluid.ShapeError,
     r"BeamSearchDecoder: the logits .*f64\[\?,7\] must be \[batch, beam_size=2, vocab\]"),
    (lambda: L.dynamic_decode(Undone(), inits=_h0()), TypeError,
     r"dynamic_decode: the finished flags Undone.initialize returns .* must be a bool var"),
    (lambda: L.dynamic_decode(NoStep(), inits=_h0()), NotImplementedError,
     r"NoStep must define step\(time, inputs, states\)"),
    (lambda: L.dynamic_decode(L.Decoder(), inits=_h0()), NotImplementedError,
     r"Decoder must define initialize\(inits\)"),
    (lambda: L.dynamic_decode(L.BasicDecoder(Cell(), L.DecodeHelper()), inits=_h0()),
     NotImplementedError, r"DecodeHelper must define initialize\(\)"),
    (lambda: L.dynamic_decode(L.BeamSearchDecoder(Cell(), START, END, 2, embed, project),
                              inits=_h0(), max_step_num=-1), TypeError,
     r"dynamic_decode: max_step_num=-1 must be at least 0"),
    (_direct_step, TypeError, r"early_stopping with a length_penalty needs dynamic_decode's "
                              r"max_step_num"),
])
def test_more_decoding_mistakes_are_clear_errors(build, error, match):
    prog = type("P", (fluid.Program,), {
        "f": fluid.network("h0")(lambda self, h0: build()[0])})()
    with pytest.raises(error, match=rf"(?s){match}"):
        prog.Compile()
