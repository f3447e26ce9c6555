"""benchmarks/bench_decode.py stays runnable and fair: its PyTorch beam search over the
GRU cell is the search BeamSearchDecoder runs (the same ids and log-probabilities, in
float32, on a small case)."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_decode  # noqa: E402


def test_the_torch_search_is_the_decoders_search():
    pytest.importorskip("torch")
    prog = bench_decode.decoder_program(vocab=40, hidden=16, steps=7)
    h0 = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    ids, log_probs = prog.decode(h0)
    t_ids, t_log_probs = bench_decode.torch_search(prog.parameters(), steps=7)(h0)
    assert ids.shape == (5, 7, bench_decode.BEAM)      # the end never comes: every step
    np.testing.assert_array_equal(t_ids, ids)
    np.testing.assert_allclose(t_log_probs, log_probs, rtol=1e-5, atol=1e-4)
