"""A beam search written in NumPy with BeamSearchDecoder's rules, independent of fluid:
log-softmax scores added up; a finished beam offers only the end token, at no cost; the
beam_size best of beam x vocab candidates of each row go on; a row's first step starts
from beam 0 alone; at most max_step_num + 1 steps, fewer when every beam has finished;
optionally GNMT's length penalty and early stopping. Also the cell the tests decode with:
h' = tanh(embed(id) @ wx + h @ wh + bh), logits = h' @ wo + bo."""
from __future__ import annotations

import numpy as np

KINF = 1e9


def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def cell_step(p, ids, h):
    """The test cell on ids [...] and states [..., H]: (new states, logits)."""
    h_new = np.tanh(p["emb"][ids] @ p["wx"] + h @ p["wh"] + p["bh"])
    return h_new, h_new @ p["wo"] + p["bo"]


def penalty(lengths, alpha):
    return ((5.0 + lengths) / 6.0) ** alpha


def beam_search(p, h0, beam, max_step_num, start=0, end=1, alpha=0.0, early=False):
    """Returns (ids [B, T, beam] traced back, log_probs [B, beam], lengths [B, beam],
    finished [B, beam])."""
    batch, vocab = len(h0), p["wo"].shape[1]
    rows = np.arange(batch)[:, None]
    h = np.repeat(h0[:, None], beam, axis=1)
    log_probs = np.tile([0.0] + [-KINF] * (beam - 1), (batch, 1))
    finished = np.zeros((batch, beam), bool)
    lengths = np.zeros((batch, beam), np.int64)
    tokens = np.full((batch, beam), start)
    only_end = np.full(vocab, -KINF)
    only_end[end] = 0.0
    ids, parents = [], []
    for _ in range(max_step_num + 1):
        h_new, logits = cell_step(p, tokens, h)
        step = log_softmax(logits)
        step[finished] = only_end
        lp = step + log_probs[..., None]
        scores = lp / penalty(lengths + ~finished, alpha)[..., None] if alpha else lp
        flat = scores.reshape(batch, -1)
        top = np.argsort(-flat, axis=1, kind="stable")[:, :beam]
        parent, tokens = top // vocab, top % vocab
        log_probs = np.take_along_axis(lp.reshape(batch, -1), top, 1)
        top_scores = np.take_along_axis(flat, top, 1)
        h = h_new[rows, parent]
        was = finished[rows, parent]
        lengths = lengths[rows, parent] + ~was
        finished = was | (tokens == end)
        if early:
            reach = log_probs / penalty(max_step_num + 1, alpha) if alpha else log_probs
            best_done = np.where(finished, top_scores, -np.inf).max(axis=1)
            best_open = np.where(finished, -np.inf, reach).max(axis=1)
            finished = finished | (best_done >= best_open)[:, None]
        ids.append(tokens)
        parents.append(parent)
        if finished.all():
            break
    return backtrack(ids, parents), log_probs, lengths, finished


def backtrack(ids, parents):
    """[T] of [B, beam] ids and parents -> each final beam's ids [B, T, beam]."""
    steps = len(ids)
    out = np.empty((steps,) + ids[0].shape, np.int64)
    beam = np.tile(np.arange(ids[0].shape[1]), (ids[0].shape[0], 1))
    for t in range(steps - 1, -1, -1):
        out[t] = np.take_along_axis(ids[t], beam, 1)
        beam = np.take_along_axis(parents[t], beam, 1)
    return out.transpose(1, 0, 2)


def exhaustive(p, h0, end=1, start=0):
    """Every hypothesis of at most two steps, best first: [(log_prob, ids)] per row."""
    vocab = p["wo"].shape[1]
    result = []
    for row in h0:
        h1, logits = cell_step(p, np.array(start), row)
        first = log_softmax(logits)
        found = []
        for a in range(vocab):
            if a == end:
                found.append((first[a], [a]))
                continue
            second = log_softmax(cell_step(p, np.array(a), h1)[1])
            found += [(first[a] + second[b], [a, b]) for b in range(vocab)]
        result.append(sorted(found, key=lambda f: -f[0]))
    return result
