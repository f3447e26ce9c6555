"""What a beam search costs: beam-4 decoding of a batch of 64 for 30 steps with a GRU cell
of 256 units (`BeamSearchDecoder` through `dynamic_decode`, a `While` loop) against the
same search written by hand in PyTorch eager mode over the same cell and weights (one
thread each). The end token is never chosen (its bias is very low), so both run every
step; they give the same ids (but where float32 sums in another order swap two
near-equal candidates), checked before timing. Run:

    python benchmarks/bench_decode.py [--rounds 5] [--vocab 1000]

Prints ms per decode for each and the ratio fluid / PyTorch.
"""
from __future__ import annotations

import argparse
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # one BLAS thread: comparable on a shared machine

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension")]

from _timing import interleaved_us  # noqa: E402

import fluid  # noqa: E402

L = fluid.layers
BATCH, BEAM, STEPS, HIDDEN, EMBED = 64, 4, 30, 256, 128
START, END = 0, 1


def decoder_program(vocab: int, hidden: int = HIDDEN, steps: int = STEPS):
    """The compiled program: ``decode(h0)`` -> ids [batch, T, beam], log-probs."""

    class Decode(fluid.Program):
        @fluid.network("h0")
        def decode(self, h0):
            h0 = L.data("h0", shape=[hidden])
            decoder = L.BeamSearchDecoder(
                L.GRUCell(hidden, name="gru"), START, END, BEAM,
                embedding_fn=lambda ids: fluid.embedding(ids, [vocab, EMBED],
                                                         param_attr="emb"),
                output_fn=lambda x: L.fc(x, vocab, num_flatten_dims=2, param_attr="out.w",
                                         bias_attr="out.b"))
            ids, states = L.dynamic_decode(decoder, inits=h0, max_step_num=steps - 1,
                                           is_test=True)
            return ids, states.log_probs

    prog = Decode().Compile(seed=0)
    bias = prog.get_var("out.b")
    bias[END] = -1e4                       # never the end: every step runs
    prog.set_var("out.b", bias)
    return prog


def torch_search(params: dict[str, np.ndarray], steps: int = STEPS):
    """The same beam search in PyTorch: the GRU cell (Paddle's: reset before the
    product), log-softmax scores, finished beams kept, top-k over beam x vocab."""
    import torch
    torch.set_num_threads(1)
    p = {k: torch.tensor(v) for k, v in params.items()}
    w_gate, w_cand = p["gru_0.w_0"], p["gru_0.w_1"]
    b_gate, b_cand = p["gru_0.b_0"], p["gru_0.b_1"]
    emb, out_w, out_b = p["emb"], p["out.w"], p["out.b"]
    vocab = emb.shape[0]
    only_end = torch.full((vocab,), -1e9)
    only_end[END] = 0.0

    @torch.no_grad()
    def search(h0: np.ndarray):
        n = h0.shape[0]
        h = torch.tensor(h0).repeat_interleave(BEAM, 0)                # [n * beam, H]
        log_probs = torch.tensor([0.0] + [-1e9] * (BEAM - 1)).repeat(n, 1)
        finished = torch.zeros(n, BEAM, dtype=torch.bool)
        tokens = torch.full((n * BEAM,), START)
        rows = (torch.arange(n) * BEAM)[:, None]
        ids, parents = [], []
        for _ in range(steps):
            x = emb[tokens]
            r, u = torch.sigmoid(torch.cat([x, h], 1) @ w_gate + b_gate).chunk(2, 1)
            c = torch.tanh(torch.cat([x, r * h], 1) @ w_cand + b_cand)
            h = c + u * (h - c)
            step = torch.log_softmax(h @ out_w + out_b, -1).view(n, BEAM, vocab)
            step = torch.where(finished[..., None], only_end, step)
            scores = (step + log_probs[..., None]).view(n, -1)
            log_probs, top = scores.topk(BEAM, dim=1)
            parent, tokens = top // vocab, top % vocab
            flat = (parent + rows).view(-1)
            h = h[flat]
            finished = finished.view(-1)[flat].view(n, BEAM) | (tokens == END)
            tokens = tokens.reshape(-1)
            ids.append(tokens.view(n, BEAM))
            parents.append(parent)
            if bool(finished.all()):
                break
        beam = torch.arange(BEAM).repeat(n, 1)
        out = []
        for t in range(len(ids) - 1, -1, -1):                        # back through time
            out.append(ids[t].gather(1, beam))
            beam = parents[t].gather(1, beam)
        return torch.stack(out[::-1], 1).numpy(), log_probs.numpy()
    return search


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=1000)
    args = parser.parse_args()
    prog = decoder_program(args.vocab)
    h0 = np.random.default_rng(0).standard_normal((BATCH, HIDDEN)).astype(np.float32)
    ids, log_probs = prog.decode(h0)
    print(f"beam {BEAM}, batch {BATCH}, {ids.shape[1]} steps, GRU {HIDDEN}, "
          f"vocabulary {args.vocab}")
    contenders = {"fluid": lambda: prog.decode(h0)}
    try:
        search = torch_search(prog.parameters())
    except ImportError:
        search = None
        print("PyTorch is not installed: fluid alone")
    if search is not None:
        t_ids, t_log_probs = search(h0)
        # float32 sums in another order may swap two near-equal candidates of a row
        same = (t_ids == ids).all(axis=(1, 2))
        assert same.mean() > 0.9, f"only {same.mean():.0%} of the rows agree"
        np.testing.assert_allclose(t_log_probs[same], log_probs[same], rtol=1e-4, atol=1e-3)
        print(f"the same ids in {same.sum()} of {len(same)} rows (float32)")
        contenders["torch"] = lambda: search(h0)
    us = interleaved_us(contenders, calls=3, rounds=args.rounds)
    for name, t in us.items():
        print(f"{name:6} {t / 1e3:8.1f} ms per decode")
    if "torch" in us:
        print(f"ratio fluid / PyTorch: {us['fluid'] / us['torch']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
