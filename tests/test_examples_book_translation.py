"""Paddle 1.8's book networks (examples/book/) compile over padded batches and train: a
few steps on one synthetic batch of the right shapes lower the loss at every step; the
machine translation's beam search decodes that batch."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "book"))

import machine_translation  # noqa: E402
import rnn_encoder_decoder  # noqa: E402


@pytest.mark.parametrize("book", [machine_translation, rnn_encoder_decoder],
                         ids=["machine_translation", "rnn_encoder_decoder"])
def test_a_book_network_trains(book, capsys):
    losses = book.main(steps=5, learning_rate=0.1)     # the book's 1e-4 moves it too little
    assert np.isfinite(losses).all() and losses[0] == pytest.approx(np.log(30000), rel=0.01)
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert "losses:" in capsys.readouterr().out


def test_the_book_beam_search_decodes_padded_sources():
    mt = machine_translation
    prog = mt.MachineTranslation(dict_size=50, end_id=3, max_length=6).Compile(seed=0)
    data = mt.synthetic_batch(np.random.default_rng(0), 3, 50)
    ids, scores = mt.start_beam(3, mt.MachineTranslation.beam_size)
    sentences, sentence_scores, lengths = prog.decode(data["src"], data["src_len"], ids,
                                                      scores)
    assert sentences.shape[:2] == (3, 2) and lengths.shape == (3, 2)
    assert sentences.shape[2] <= 7 and (sentences[:, :, 0] == 1).all()   # the start id
    # hypotheses best first; each score is the running sum of its words' log-probabilities
    final = np.take_along_axis(sentence_scores, lengths[..., None] - 1, 2)[..., 0]
    assert (final[:, 0] >= final[:, 1]).all() and (np.diff(sentence_scores[0, 0, :lengths[
        0, 0]]) <= 0).all()
