"""Cases of the sequence ops over a padded batch and its lengths, and of the row routing
of IfElse, each against the vectorised NumPy a careful person would write (a mask of the
valid steps, shifted slices, one gather)."""
from __future__ import annotations

import numpy as np

from fluid_interactive.frontend.layers.helpers import LayerHelper
from fluid_interactive.ops.sequence_conv import position_table

from . import OpCase, f32, i64

B, T, D = 32, 64, 64
LENGTHS = np.random.default_rng(1).integers(1, T + 1, B).astype("int64")
BIG = 256     # rows of the cases whose work per element is small
BIG_LENGTHS = np.random.default_rng(2).integers(1, 2 * T + 1, BIG).astype("int64")


def _mask(n, time=T, rank=3):
    m = np.arange(time)[None, :] < n[:, None]
    return m.reshape(m.shape + (1,) * (rank - 2))


def _op(op_type, inputs, attrs=None, slot=None):
    """The op alone (its parameters fed as data): the method's one op."""
    helper = LayerHelper(op_type)
    if slot is None:
        return helper.append_one(op_type, inputs, attrs)
    return helper.append(op_type, inputs, attrs)[slot][0]


def _shifted(x, k):
    """x moved k steps earlier along T, zeros after: x[:, t + k]."""
    out = np.zeros_like(x)
    out[:, :x.shape[1] - k] = x[:, k:]
    return out


def _seq_conv_np(x, w, n):
    xm = np.where(_mask(n), x, 0)
    padded = np.pad(xm, ((0, 0), (1, 1), (0, 0)))
    cols = np.concatenate([padded[:, k:k + T] for k in range(3)], axis=2)
    return np.where(_mask(n), cols @ w, 0)


def _row_conv_np(x, w, n):
    xm = np.where(_mask(n), x, 0)
    return sum(_shifted(xm, k) * w[k] for k in range(w.shape[0]))


TABLE = np.asarray(position_table(T, D), "float32")[None]


def _slice_np(x, off, ln, n):
    src = np.where(np.arange(T)[None, :] < ln[:, None], off[:, None] + np.arange(T), 0)
    return np.where(_mask(ln), x[np.arange(B)[:, None], src], 0)


def _concat_np(a, b, n):
    out = np.zeros((B, 2 * T, D), "float32")
    dest = np.arange(B)[:, None] * 2 * T + np.arange(T)
    flat = out.reshape(-1, D)
    flat[dest[_mask(n, rank=2)]] = a[_mask(n, rank=2)]
    flat[(dest + n[:, None])[_mask(n, rank=2)]] = b[_mask(n, rank=2)]
    return out


def _enumerate_np(ids, n):
    at = np.arange(T)[:, None] + np.arange(3)
    inside = at[None] < n[:, None, None]
    return np.where(inside, ids[np.arange(B)[:, None, None], np.where(inside, at, 0)], 0)


def _reshape_np(x, n):
    valid = np.arange(T * D)[None] < (n * D)[:, None]
    return np.where(valid, x.reshape(B, T * D), 0).reshape(B, T // 2, 2 * D)


def _scatter_np(x, ids, upd, n):
    m = _mask(n, 2 * T, rank=2)
    flat = np.where(m, np.arange(BIG)[:, None] * 4 * D + ids, 0)
    added = np.bincount(flat.ravel(), np.where(m, upd, 0).ravel(), minlength=x.size)
    return x + added.reshape(x.shape).astype("float32")


def _lstmp_np(x, w, pw, bias, n):
    """The recurrence as hand-written NumPy, time-major, state frozen past each length."""
    h = w.shape[1] // 4
    xt = x.transpose(1, 0, 2) + bias[0, :4 * h]
    r, c = np.zeros((x.shape[0], w.shape[0]), x.dtype), np.zeros((x.shape[0], h), x.dtype)
    out = np.zeros((x.shape[1], x.shape[0], w.shape[0]), x.dtype)
    for t in range(x.shape[1]):
        z = xt[t] + r @ w
        cand, gates = np.tanh(z[:, :h]), 0.5 * np.tanh(0.5 * z[:, h:]) + 0.5
        c_new = gates[:, h:2 * h] * c + gates[:, :h] * cand
        r_new = np.tanh((gates[:, 2 * h:] * np.tanh(c_new)) @ pw)
        valid = (t < n)[:, None]
        c, r = np.where(valid, c_new, c), np.where(valid, r_new, r)
        out[t] = np.where(valid, r, 0)
    return out.transpose(1, 0, 2)


X, N = f32(B, T, D), LENGTHS
CASES = [
    OpCase("sequence_conv", {"x": f32(B, T, 32), "w": f32(96, 64, seed=1), "n": N},
           layer=lambda x, w, n: _op("sequence_conv", {"X": x, "Filter": w, "Lengths": n},
                                     {"contextLength": 3, "contextStart": -1}),
           numpy=_seq_conv_np, rtol=1e-4, atol=1e-5),
    OpCase("row_conv", {"x": X, "w": f32(4, D, seed=1), "n": N},
           layer=lambda x, w, n: _op("row_conv", {"X": x, "Filter": w, "Lengths": n}),
           numpy=_row_conv_np, rtol=1e-4, atol=1e-5),
    OpCase("add_position_encoding", {"x": X, "n": N},
           layer=lambda x, n: _op("add_position_encoding", {"X": x, "Lengths": n},
                                  {"alpha": 0.5, "beta": 2.0}),
           numpy=lambda x, n: np.where(_mask(n), 0.5 * x + 2.0 * TABLE, 0), rtol=1e-5),
    OpCase("sequence_pad", {"x": X, "p": f32(1), "n": N},
           layer=lambda x, p, n: _op("sequence_pad", {"X": x, "PadValue": p, "Lengths": n},
                                     {"padded_length": T}, slot="Out"),
           numpy=lambda x, p, n: np.where(_mask(n), x, p)),
    OpCase("sequence_unpad", {"x": X, "n": N},
           layer=lambda x, n: _op("sequence_unpad", {"X": x, "Lengths": n}),
           numpy=lambda x, n: np.where(_mask(n), x, 0)),
    OpCase("sequence_expand", {"x": f32(B, D), "y": f32(B, T, 1), "n": N},
           layer=lambda x, y, n: _op("sequence_expand", {"X": x, "Y": y, "YLengths": n}),
           numpy=lambda x, y, n: np.where(_mask(n), x[:, None], 0)),
    OpCase("sequence_slice", {"x": X, "off": N // 3, "ln": N - N // 3, "n": N},
           layer=lambda x, off, ln, n: _op("sequence_slice", {"X": x, "Offset": off,
                                                              "Length": ln, "Lengths": n}),
           numpy=_slice_np),
    OpCase("sequence_concat", {"a": X, "b": f32(B, T, D, seed=2), "n": N},
           layer=lambda a, b, n: _op("sequence_concat", {"X": [a, b], "Lengths": [n, n]},
                                     slot="Out"),
           numpy=_concat_np),
    OpCase("sequence_enumerate", {"ids": i64(B, T, high=1000), "n": N},
           layer=lambda ids, n: _op("sequence_enumerate", {"X": ids, "Lengths": n},
                                    {"win_size": 3}),
           numpy=_enumerate_np),
    OpCase("sequence_reshape", {"x": X, "n": N // 2 * 2},
           layer=lambda x, n: _op("sequence_reshape", {"X": x, "Lengths": n},
                                  {"new_dim": 2 * D}, slot="Out"),
           numpy=_reshape_np),
    OpCase("sequence_scatter", {"x": f32(BIG, 4 * D), "ids": i64(BIG, 2 * T, high=4 * D),
                                "upd": f32(BIG, 2 * T, seed=3), "n": BIG_LENGTHS},
           layer=lambda x, ids, upd, n: _op("sequence_scatter", {"X": x, "Ids": ids,
                                                                 "Updates": upd, "Lengths": n}),
           numpy=_scatter_np, rtol=1e-4, atol=1e-5),
    OpCase("lstmp", {"x": f32(16, 20, 128), "w": f32(16, 128, seed=1, low=-0.3, high=0.3),
                     "pw": f32(32, 16, seed=2, low=-0.3, high=0.3),
                     "bias": f32(1, 128, seed=3), "n": LENGTHS[:16] % 20 + 1},
           layer=lambda x, w, pw, bias, n: _op(
               "lstmp", {"Input": x, "Weight": w, "ProjWeight": pw, "Bias": bias, "Lengths": n},
               {"use_peepholes": False}, slot="Projection"),
           numpy=_lstmp_np, rtol=1e-4, atol=1e-5),
    OpCase("split_lod_tensor", {"x": f32(8 * BIG, 4 * D), "m": (f32(8 * BIG, 1) > 0)},
           layer=lambda x, m: _op("split_lod_tensor", {"X": x, "Mask": m}, slot="OutTrue"),
           numpy=lambda x, m: (x[m[:, 0]], x[~m[:, 0]])),     # the op gives both sides
]
