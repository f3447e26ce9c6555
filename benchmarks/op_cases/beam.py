"""The beam search ops over padded batches (beam_search, beam_search_decode) against the
NumPy expressions a careful person would write for one step and for the backtrack."""
from __future__ import annotations

import numpy as np

import fluid

from . import OpCase, f32, i64

L = fluid.layers
SOURCES, BEAM, K, STEPS, END = 512, 4, 8, 12, 1
ROWS = SOURCES * BEAM


def _np_beam_search(pre_ids, pre_scores, ids, scores):
    ended = pre_ids == END
    first = np.arange(K) == 0
    cand = np.where(ended, np.where(first, pre_scores, -np.inf), scores)
    cand_ids = np.where(ended, END, ids)
    flat = cand.reshape(SOURCES, BEAM * K)
    pick = np.argsort(-flat, axis=1, kind="stable")[:, :BEAM]
    row = pick // K
    order = np.argsort(row, axis=1, kind="stable")
    parent = (np.take_along_axis(row, order, 1) + np.arange(SOURCES)[:, None] * BEAM).ravel()
    col = np.take_along_axis(pick % K, order, 1).ravel()
    return cand_ids[parent, col][:, None], cand[parent, col][:, None]


def _beam_search_layer(pre_ids, pre_scores, ids, scores):
    return L.beam_search(pre_ids, pre_scores, ids, scores, BEAM, END)


def _np_decode(ids, scores, parents):
    steps, n = ids.shape[:2]
    ids, scores = ids.reshape(steps, n), scores.reshape(steps, n)
    path_ids, path_scores = np.empty_like(ids), np.empty_like(scores)
    row = np.arange(n)
    for t in range(steps - 1, -1, -1):
        path_ids[t], path_scores[t] = ids[t, row], scores[t, row]
        row = parents[t, row]
    keep = path_ids != END
    keep[-1] = True
    position = np.cumsum(keep, axis=0) - 1
    out_ids, out_scores = np.full((n, steps), END), np.zeros((n, steps), scores.dtype)
    t_kept, r_kept = np.nonzero(keep)
    out_ids[r_kept, position[t_kept, r_kept]] = path_ids[t_kept, r_kept]
    out_scores[r_kept, position[t_kept, r_kept]] = path_scores[t_kept, r_kept]
    order = np.argsort(-path_scores[-1].reshape(-1, BEAM), axis=1, kind="stable")
    rows = (order + np.arange(n // BEAM)[:, None] * BEAM).ravel()
    shape = (n // BEAM, BEAM, steps)
    return out_ids[rows].reshape(shape), out_scores[rows].reshape(shape)


def _decode_layer(ids, scores, parents):
    """The steps written into tensor arrays (what a decode loop fills), then decoded."""
    arrays = [L.create_array(d) for d in ("int64", "float32", "int64")]
    for t in range(STEPS):
        i = L.fill_constant([1], "int64", t)
        for array, steps in zip(arrays, (ids, scores, parents)):
            L.array_write(steps[t], i, array=array)
    return L.beam_search_decode(arrays[0], arrays[1], BEAM, END, parent_idx=arrays[2])


def _parents() -> np.ndarray:
    """Each row's parent: a row of its own source."""
    own = i64(STEPS, ROWS, high=BEAM, seed=3)
    return own + (np.arange(ROWS) // BEAM * BEAM)[None, :]


CASES = [
    OpCase("beam_search",
           {"pre_ids": i64(ROWS, 1, high=12), "pre_scores": f32(ROWS, 1, seed=1, low=-5),
            "ids": i64(ROWS, K, high=1000, seed=2), "scores": f32(ROWS, K, seed=3, low=-9)},
           _beam_search_layer, _np_beam_search),
    OpCase("beam_search_decode",
           {"ids": i64(STEPS, ROWS, 1, high=20, seed=4),
            "scores": f32(STEPS, ROWS, 1, seed=5, low=-9), "parents": _parents()},
           _decode_layer, _np_decode),
]
