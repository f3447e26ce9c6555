"""The sequence ops that move, index and convolve a padded batch: each against a reference
written over Paddle's LoD form (the sequences one after another) on the inputs and attrs of
Paddle 1.8's own unit tests, converted to padded + lengths with a non-zero value in the
padding; every gradient against float64 finite differences; the convolutions against
PyTorch's conv1d."""
import numpy as np
import pytest
import torch
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ops.sequence_conv import position_table

PAD = 7.5     # what the padding of every input holds: it must never matter


def offsets(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(int)


def to_padded(flat, lens, time=None, fill=PAD):
    """The LoD tensor ``flat`` (sequences of ``lens`` one after another) as [B, T, ...]."""
    time = max(lens, default=0) if time is None else time
    out = np.full((len(lens), time) + flat.shape[1:], fill, dtype=flat.dtype)
    for b, (o, n) in enumerate(zip(offsets(lens), lens)):
        out[b, :n] = flat[o:o + n]
    return out


def lengths(lens):
    return np.asarray(lens, np.int64)


# --- sequence_conv (test_sequence_conv.py) ----------------------------------------------------

def ref_seqconv_lod(x, lens, w, taps, start, trainable, pad):
    """Each step's context rows concatenated, times w; outside a sequence zero or a row of
    pad (before it: row step + up; after it: row up + step - length)."""
    up = max(0, -start)
    rows = []
    for o, n in zip(offsets(lens), lens):
        for t in range(n):
            ctx = []
            for j in range(taps):
                p = t + start + j
                if 0 <= p < n:
                    ctx.append(x[o + p])
                elif trainable:
                    ctx.append(pad[p + up] if p < 0 else pad[up + p - n])
                else:
                    ctx.append(np.zeros(x.shape[1]))
            rows.append(np.concatenate(ctx))
    return np.asarray(rows).reshape(-1, taps * x.shape[1]) @ w


CONV_CASES = [  # (start, taps, trainable, lod, D): Paddle's cases, then ones of our own
    (0, 1, False, [4, 1, 3, 3], 23), (-1, 3, True, [4, 1, 3, 3], 50),
    (-1, 3, False, [4, 1, 3, 3], 50), (2, 3, True, [4, 1, 0, 3, 3], 6),
    (-5, 3, True, [4, 1, 0, 6], 5), (-2, 5, True, [1, 2, 6], 4)]


@pytest.mark.parametrize("start,taps,trainable,lod,d", CONV_CASES)
def test_sequence_conv(rng, start, taps, trainable, lod, d):
    x = rng.uniform(0.1, 1, (sum(lod), d))
    w = rng.uniform(0.1, 1, (taps * d, 8))
    n_pad = max(0, -start) + max(0, start + taps - 1)
    pad = rng.uniform(0.1, 1, (n_pad, d))
    inputs = {"X": to_padded(x, lod, max(lod) + 1), "Filter": w, "Lengths": lengths(lod)}
    if trainable:
        inputs["PaddingData"] = pad
    attrs = {"contextStart": start, "contextLength": taps, "paddingTrainable": trainable}
    want = to_padded(ref_seqconv_lod(x, lod, w, taps, start, trainable, pad), lod,
                     max(lod) + 1, fill=0.0)
    check_op("sequence_conv", inputs, attrs, reference=lambda **_: want, rtol=1e-10)
    small = dict(inputs, X=inputs["X"][..., :3], Filter=w[:taps * 3, :2])
    if trainable:
        small["PaddingData"] = pad[:, :3]
    check_grad("sequence_conv", {k: (v if k != "X" else _repad(v, lod, 3.7))
                                 for k, v in small.items()}, attrs,
               wrt=["X", "Filter"] + (["PaddingData"] if trainable else []))


def _repad(x, lod, value):
    x = x.copy()
    x[np.arange(x.shape[1])[None, :] >= np.asarray(lod)[:, None]] = value
    return x


def test_sequence_conv_full_rows_is_torch_conv1d(rng):
    """Without lengths and with zero padding, a 'same' convolution: torch's conv1d with the
    filter [taps * D, N] as [N, D, taps]."""
    x, w = rng.standard_normal((3, 9, 4)), rng.standard_normal((3 * 4, 5))
    got = run_forward("sequence_conv", {"X": x, "Filter": w},
                      {"contextStart": -1, "contextLength": 3})["Out"][0]
    kernel = torch.from_numpy(w.reshape(3, 4, 5).transpose(2, 1, 0).copy())
    want = torch.nn.functional.conv1d(torch.from_numpy(x).transpose(1, 2), kernel, padding=1)
    np.testing.assert_allclose(got, want.transpose(1, 2).numpy(), rtol=1e-12, atol=1e-12)


def test_sequence_conv_errors():
    x, w = np.zeros((2, 3, 4)), np.zeros((12, 2))
    with pytest.raises(ShapeError, match="contextStride must be 1"):
        run_forward("sequence_conv", {"X": x, "Filter": w}, {"contextStride": 2})
    with pytest.raises(ShapeError, match=r"Filter must be float64\[12,"):
        run_forward("sequence_conv", {"X": x, "Filter": np.zeros((8, 2))})
    with pytest.raises(ShapeError, match="paddingTrainable needs PaddingData"):
        run_forward("sequence_conv", {"X": x, "Filter": w},
                    {"paddingTrainable": True, "contextStart": -1})
    with pytest.raises(DTypeError, match="float32 or float64"):
        run_forward("sequence_conv", {"X": x.astype(np.int64), "Filter": w})


# --- row_conv (test_row_conv_op.py) -------------------------------------------------------------

def ref_row_conv_lod(x, lens, w):
    out = np.zeros_like(x)
    for o, n in zip(offsets(lens), lens):
        for t in range(n):
            for k in range(w.shape[0]):
                if t + k < n:
                    out[o + t] += x[o + t + k] * w[k]
    return out


@pytest.mark.parametrize("lod,d,ctx", [([2, 3, 2], 16, 8), ([20, 30, 50], 35, 35),
                                       ([4, 0, 1], 3, 2)])
def test_row_conv(rng, lod, d, ctx):
    x, w = rng.random((sum(lod), d)), rng.random((ctx, d))
    inputs = {"X": to_padded(x, lod), "Filter": w, "Lengths": lengths(lod)}
    want = to_padded(ref_row_conv_lod(x, lod, w), lod, fill=0.0)
    check_op("row_conv", inputs, reference=lambda **_: want, rtol=1e-10)
    if sum(lod) < 20:
        check_grad("row_conv", dict(inputs, X=_repad(inputs["X"], lod, 3.7)),
                   wrt=["X", "Filter"])


def test_row_conv_full_rows_is_a_depthwise_torch_conv1d(rng):
    x, w = rng.standard_normal((2, 7, 3)), rng.standard_normal((3, 3))
    got = run_forward("row_conv", {"X": x, "Filter": w})["Out"][0]
    want = torch.nn.functional.conv1d(torch.from_numpy(x).transpose(1, 2),
                                      torch.from_numpy(w.T.copy()).unsqueeze(1),
                                      padding=(0,), groups=3)
    want = torch.nn.functional.pad(want, (0, 2))   # lookahead past the end reads zeros
    torch_like = np.zeros_like(x)
    for t in range(7):   # conv1d without padding gives the steps whose window fits
        torch_like[:, t] = sum(x[:, t + k] * w[k] for k in range(3) if t + k < 7)
    np.testing.assert_allclose(got[:, :5], want.transpose(1, 2).numpy()[:, :5], rtol=1e-12)
    np.testing.assert_allclose(got, torch_like, rtol=1e-12)


# --- add_position_encoding (test_add_position_encoding_op.py) -----------------------------------

def ref_position(x, alpha, beta):
    out = x.copy()
    half = x.shape[-1] // 2
    for j in range(x.shape[0]):
        for k in range(half):
            val = j / 10000.0 ** (k / (half - 1)) if half > 1 else j / 10000.0
            out[j, k] = x[j, k] * alpha + np.sin(val) * beta
            out[j, half + k] = x[j, half + k] * alpha + np.cos(val) * beta
    return out


def test_add_position_encoding(rng):
    x = rng.uniform(0.1, 1, (2, 15, 4))
    attrs = {"alpha": 0.6, "beta": 0.5}
    check_op("add_position_encoding", {"X": x}, attrs,
             reference=lambda **_: np.stack([ref_position(r, 0.6, 0.5) for r in x]))
    lod = [3, 7, 0]    # positions start again at 0 in every sequence
    flat = rng.uniform(0.1, 1, (10, 6))
    want = np.concatenate([ref_position(flat[o:o + n], 0.6, 0.5)
                           for o, n in zip(offsets(lod), lod)])
    inputs = {"X": to_padded(flat, lod), "Lengths": lengths(lod)}
    check_op("add_position_encoding", inputs, attrs,
             reference=lambda **_: to_padded(want, lod, fill=0.0), rtol=1e-10)
    check_grad("add_position_encoding", inputs, attrs)
    assert np.allclose(position_table(3, 2)[2], [np.sin(2e-4), np.cos(2e-4)])


def test_add_position_encoding_needs_an_even_width():
    with pytest.raises(ShapeError, match="must be even"):
        run_forward("add_position_encoding", {"X": np.zeros((1, 2, 3))})


# --- sequence_pad / sequence_unpad (test_sequence_pad_op.py, test_sequence_unpad_op.py) ---------

PAD_CASES = [((12, 10), [2, 3, 4, 3], [1.0], -1), ((12, 10), [2, 3, 4, 3], "vector", -1),
             ((12, 10), [2, 3, 4, 3], [1.0], 7), ((12, 2, 5), [2, 3, 4, 3], "vector", 7),
             ((12, 2, 5), [0, 8, 0, 4, 0], [1.0], -1)]


@pytest.mark.parametrize("shape,lod,pad_value,padded_length", PAD_CASES)
def test_sequence_pad(rng, shape, lod, pad_value, padded_length):
    x = rng.uniform(0.1, 0.5, shape)
    pad = rng.random(shape[1:]) if pad_value == "vector" else np.asarray(pad_value)
    out_len = max(lod) if padded_length < 0 else padded_length
    want = np.stack([np.concatenate([x[o:o + n]] + [np.broadcast_to(pad, shape[1:])[None]] *
                                    (out_len - n)) for o, n in zip(offsets(lod), lod)])
    inputs = {"X": to_padded(x, lod, max(lod) + 2), "PadValue": pad, "Lengths": lengths(lod)}
    attrs = {"padded_length": padded_length}
    if padded_length < 0:   # as long as the longest length: known only when it runs
        got = run_forward("sequence_pad", inputs, attrs)
        np.testing.assert_array_equal(got["Out"][0], want)
        np.testing.assert_array_equal(got["Length"][0], lod)
    else:
        check_op("sequence_pad", inputs, attrs,
                 reference=lambda **_: {"Out": want, "Length": lengths(lod)})
    small = dict(inputs, X=_repad(inputs["X"][:, :, :2], lod, 3.7),
                 PadValue=pad[:2] if pad.size > 1 else pad)
    check_grad("sequence_pad", small, attrs, wrt=["X", "PadValue"], through=["Out"])


def test_sequence_pad_refuses_a_padded_length_shorter_than_a_sequence():
    with pytest.raises(ValueError, match="padded_length 2 is shorter than the longest"):
        run_forward("sequence_pad", {"X": np.zeros((2, 4)), "Lengths": lengths([3, 1])},
                    {"padded_length": 2})


@pytest.mark.parametrize("shape,lens", [((3, 40), [2, 3, 4]), ((3, 5, 4, 3), [2, 3, 4]),
                                        ((4, 5, 2), [0, 5, 1, 0])])
def test_sequence_unpad(rng, shape, lens):
    x = rng.random(shape)
    want = x.copy()
    want[np.arange(shape[1])[None, :] >= np.asarray(lens)[:, None]] = 0
    dirty = _repad(x, lens, PAD)
    check_op("sequence_unpad", {"X": dirty, "Lengths": lengths(lens)},
             reference=lambda **_: want)
    check_grad("sequence_unpad", {"X": dirty, "Lengths": lengths(lens)})


# --- sequence_expand, sequence_expand_as (test_sequence_expand*.py) -----------------------------

def ref_expand(x, x_lens, repeats):
    """x's sequence i (one row when x_lens is None) repeated repeats[i] times, padded as
    [B, max repeats, (Tx,) ...] with zeros."""
    time = max(repeats)
    if x_lens is None:
        out = np.zeros((len(repeats), time) + x.shape[1:])
        for b, r in enumerate(repeats):
            out[b, :r] = x[b]
        return out
    tx = max(x_lens, default=0)
    out = np.zeros((len(repeats), time, tx) + x.shape[1:])
    for b, (o, n, r) in enumerate(zip(offsets(x_lens), x_lens, repeats)):
        out[b, :r, :n] = x[o:o + n]
    return out


EXPAND_CASES = [  # (x shape, x lod or None, repeats = y's lod at ref_level)
    ((3, 40), None, [1, 3, 4]), ((5, 20), None, [2, 2, 3, 3, 3]),
    ((1, 2, 50), [1], [2]), ((4, 25), [1, 1, 1, 1], [2, 2, 2, 2]),
    ((5, 20), [2, 3], [2, 3]), ((6, 20), None, [2, 2, 3, 0, 3, 3]),
    ((4, 25), [1, 1, 0, 1, 1], [0, 2, 4, 2, 0])]


@pytest.mark.parametrize("shape,x_lod,repeats", EXPAND_CASES)
def test_sequence_expand(rng, shape, x_lod, repeats):
    x = rng.uniform(0.1, 1, shape)
    y = np.full((len(repeats), max(repeats) + 1, 1), PAD)
    inputs = {"X": x if x_lod is None else to_padded(x, x_lod),
              "Y": y, "YLengths": lengths(repeats)}
    if x_lod is not None:
        inputs["XLengths"] = lengths(x_lod)
    want = ref_expand(x, x_lod, repeats)
    pad_t = np.zeros((want.shape[0], 1) + want.shape[2:])
    check_op("sequence_expand", inputs, reference=lambda **_: np.concatenate([want, pad_t], 1))
    small = dict(inputs, X=inputs["X"][..., :3])
    check_grad("sequence_expand", small)


def test_sequence_expand_without_lengths_repeats_every_row_t_times(rng):
    x = rng.standard_normal((2, 3))
    got = run_forward("sequence_expand", {"X": x, "Y": np.zeros((2, 4))})["Out"][0]
    np.testing.assert_array_equal(got, np.repeat(x[:, None], 4, axis=1))


def test_sequence_expand_needs_one_x_row_per_y_row():
    with pytest.raises(ShapeError, match="one row per row of Y"):
        run_forward("sequence_expand", {"X": np.zeros((3, 2)), "Y": np.zeros((2, 4))})


# --- sequence_slice (test_sequence_slice_op.py) -------------------------------------------------

SLICE_CASES = [([20, 20, 20, 20, 20], [1, 2, 3, 4, 5], [10, 8, 6, 4, 2]),
               ([20, 30, 0, 30, 20], [1, 2, 0, 4, 5], [10, 8, 0, 4, 2]),
               ([0, 70, 0, 30, 0], [0, 2, 0, 4, 0], [0, 8, 0, 4, 0]),
               ([0, 100, 0, 0, 0], [0, 2, 0, 0, 0], [0, 8, 0, 0, 0])]


@pytest.mark.parametrize("lod,offset,length", SLICE_CASES)
def test_sequence_slice(rng, lod, offset, length):
    x = rng.random((100, 3, 2))
    want = np.zeros((len(lod), max(lod), 3, 2))
    for b, (o, off, n) in enumerate(zip(offsets(lod), offset, length)):
        want[b, :n] = x[o + off:o + off + n]
    inputs = {"X": to_padded(x, lod), "Offset": lengths(offset)[:, None],
              "Length": lengths(length)[:, None], "Lengths": lengths(lod)}
    check_op("sequence_slice", inputs, reference=lambda **_: want)
    check_grad("sequence_slice", dict(inputs, X=_repad(inputs["X"], lod, 3.7)))


def test_sequence_slice_past_the_end_is_an_error():
    with pytest.raises(ValueError, match="offset \\+ length <= its sequence length"):
        run_forward("sequence_slice", {"X": np.zeros((1, 5)), "Offset": lengths([2]),
                                       "Length": lengths([2]), "Lengths": lengths([3])})


# --- sequence_concat (test_sequence_concat.py) --------------------------------------------------

@pytest.mark.parametrize("lod1,lod2", [([7, 3], [12, 8]), ([10, 0], [12, 8]),
                                       ([10, 0], [20, 0]), ([0, 10], [0, 20]),
                                       ([0, 10], [20, 0])])
def test_sequence_concat(rng, lod1, lod2):
    x1, x2 = rng.random((10, 8)), rng.random((20, 8))
    pieces = [np.concatenate([x1[offsets(lod1)[b]:offsets(lod1)[b + 1]],
                              x2[offsets(lod2)[b]:offsets(lod2)[b + 1]]]) for b in range(2)]
    out_lens = [len(p) for p in pieces]
    t1, t2 = max(lod1) + 1, max(lod2)
    want = to_padded(np.concatenate(pieces), out_lens, t1 + t2, fill=0.0)
    inputs = {"X": [to_padded(x1, lod1, t1), to_padded(x2, lod2, t2)],
              "Lengths": [lengths(lod1), lengths(lod2)]}
    check_op("sequence_concat", inputs,
             reference=lambda **_: {"Out": want, "OutLengths": lengths(out_lens)})
    small = {"X": [_repad(v[..., :2], n, 3.7) for v, n in zip(inputs["X"], (lod1, lod2))],
             "Lengths": inputs["Lengths"]}
    check_grad("sequence_concat", small, through=["Out"])


def test_sequence_concat_without_lengths_joins_along_time(rng):
    a, b = rng.random((2, 3, 2)), rng.random((2, 1, 2))
    got = run_forward("sequence_concat", {"X": [a, b]})
    np.testing.assert_array_equal(got["Out"][0], np.concatenate([a, b], axis=1))
    np.testing.assert_array_equal(got["OutLengths"][0], [4, 4])


def test_sequence_concat_errors():
    with pytest.raises(ShapeError, match="differ in batch, step shape or dtype"):
        run_forward("sequence_concat", {"X": [np.zeros((2, 3, 2)), np.zeros((2, 3, 4))]})
    with pytest.raises(ShapeError, match="one lengths var per input"):
        run_forward("sequence_concat", {"X": [np.zeros((2, 3)), np.zeros((2, 3))],
                                        "Lengths": [lengths([1, 2])]})


# --- sequence_enumerate (test_sequence_enumerate_op.py) -----------------------------------------

@pytest.mark.parametrize("dtype,win,pad", [("int32", 2, 0), ("int64", 2, 0), ("int32", 5, 0),
                                           ("int32", 30, 0), ("int32", 5, 5)])
def test_sequence_enumerate(rng, dtype, win, pad):
    lod = [9, 4, 11, 6]
    x = rng.integers(0, 10, (30, 1)).astype(dtype)
    rows = []
    for o, n in zip(offsets(lod), lod):
        for t in range(n):
            rows.append([x[o + t + k, 0] if t + k < n else pad for k in range(win)])
    want = to_padded(np.asarray(rows, dtype), lod, fill=pad)
    got = check_op("sequence_enumerate", {"X": to_padded(x, lod, fill=99)[..., 0],
                                          "Lengths": lengths(lod)},
                   {"win_size": win, "pad_value": pad}, reference=lambda **_: want)
    assert got["Out"][0].dtype == dtype


# --- sequence_reshape (test_sequence_reshape.py) ------------------------------------------------

@pytest.mark.parametrize("new_dim,lod,shape", [(12, [4, 1, 3, 3], (11, 24)),
                                               (24, [4, 2, 2, 4], (12, 12)),
                                               (12, [4, 2, 2, 4], (12, 12)),
                                               (24, [0, 6, 0, 2, 4], (12, 12)),
                                               (24, [0, 2, 8, 2, 0], (12, 12))])
def test_sequence_reshape(rng, new_dim, lod, shape):
    x = rng.uniform(0.1, 1, shape)
    out_lod = [n * shape[1] // new_dim for n in lod]
    steps = -(-max(lod) * shape[1] // new_dim)
    want = to_padded(x.reshape(-1, new_dim), out_lod, steps, fill=0.0)
    inputs = {"X": to_padded(x, lod), "Lengths": lengths(lod)}
    check_op("sequence_reshape", inputs, {"new_dim": new_dim},
             reference=lambda **_: {"Out": want, "OutLengths": lengths(out_lod)})
    check_grad("sequence_reshape", dict(inputs, X=_repad(inputs["X"], lod, 3.7)),
               {"new_dim": new_dim}, through=["Out"])


def test_sequence_reshape_lengths_that_do_not_divide():
    with pytest.raises(ValueError, match="must divide by new_dim=4"):
        run_forward("sequence_reshape", {"X": np.zeros((2, 3, 2)), "Lengths": lengths([2, 1])},
                    {"new_dim": 4})
    with pytest.raises(ShapeError, match="cannot be cut into rows of new_dim=4"):
        run_forward("sequence_reshape", {"X": np.zeros((2, 3, 2))}, {"new_dim": 4})


# --- sequence_scatter (test_sequence_scatter_op.py) ---------------------------------------------

@pytest.mark.parametrize("lod", [[30, 50, 40], [60, 60, 0], [0, 60, 60], [60, 0, 60],
                                 [120, 0, 0], [0, 0, 120]])
def test_sequence_scatter(rng, lod):
    x = rng.uniform(0.1, 1.0, (3, 6))
    ids, upd = rng.integers(0, 6, (120, 1)), rng.uniform(0.1, 1.0, (120, 1))
    want = x.copy()
    for b, (o, n) in enumerate(zip(offsets(lod), lod)):
        for j in range(n):
            want[b, ids[o + j, 0]] += upd[o + j, 0]
    inputs = {"X": x, "Ids": to_padded(ids, lod, fill=99), "Updates": to_padded(upd, lod),
              "Lengths": lengths(lod)}
    check_op("sequence_scatter", inputs, reference=lambda **_: want, rtol=1e-12)
    check_grad("sequence_scatter", inputs, wrt=["X", "Updates"])


def test_sequence_scatter_bad_id():
    with pytest.raises(IndexError, match=r"ids must lie in \[0, 3\)"):
        run_forward("sequence_scatter", {"X": np.zeros((1, 3)), "Ids": np.array([[1, 3]]),
                                         "Updates": np.zeros((1, 2))})


# --- the layers in a compiled program -----------------------------------------------------------

def _data(name, shape, dtype="float32"):
    import fluid
    return fluid.layers.data(name, shape=shape, dtype=dtype, append_batch_size=False)


class SequenceModel:
    """Every new sequence layer on one padded batch, with Paddle's positional calls."""

    @staticmethod
    def build():
        import fluid
        L = fluid.layers

        class Model(fluid.Program):
            @fluid.network("x", "lengths")
            def infer(self, x, lengths):
                x, n = _data("x", [-1, -1, 4]), _data("lengths", [-1], "int64")
                conv = L.sequence_conv(x, 6, 3, 1, True, None, None, None, "tanh", lengths=n)
                look = L.row_conv(x, 2, lengths=n)
                pos = L.add_position_encoding(x, 0.5, 1.0, lengths=n)
                padded, length = L.sequence_pad(x, L.fill_constant([1], "float32", -1.0),
                                                6, lengths=n)
                both, both_n = L.sequence_concat([x, look], lengths=[n, n])
                flat, flat_n = L.sequence_reshape(x, 2, lengths=n)
                pooled = L.sequence_pool(conv, "sum", False, 0.0, lengths=n)
                mask = L.sequence_mask(n, L.fill_constant([1], "int64", 5), "float32")
                expanded = L.sequence_expand_as(pooled, x, y_lengths=n)
                return {"conv": L.sequence_unpad(conv, n), "look": look, "pos": pos,
                        "padded": padded, "length": length, "both": both, "both_n": both_n,
                        "flat_n": flat_n, "pooled": pooled, "mask": mask,
                        "expanded": expanded, "flat": flat}
        return Model().Compile(seed=0)


def test_the_layers_compile_run_and_ignore_padding(rng):
    prog = SequenceModel.build()
    x = rng.standard_normal((3, 4, 4)).astype(np.float32)
    n = lengths([4, 0, 2])
    clean, dirty = prog.infer(_repad(x, n, 0.0), n), prog.infer(_repad(x, n, 1e30), n)
    for key in clean:
        np.testing.assert_array_equal(clean[key], dirty[key], err_msg=key)
    assert clean["padded"].shape == (3, 6, 4) and (clean["padded"][1] == -1).all()
    np.testing.assert_array_equal(clean["both_n"], [8, 0, 4])
    np.testing.assert_array_equal(clean["flat_n"], [8, 0, 4])
    assert clean["mask"].shape == (3, 5) and clean["mask"].sum() == 6
    assert clean["expanded"].shape == (3, 4, 6)
    np.testing.assert_allclose(clean["expanded"][0, 3], clean["pooled"][0])
    assert not clean["conv"][2, 2:].any() and not clean["expanded"][1].any()


def test_sequence_conv_trains_through_its_filter(rng):
    import fluid

    class Train(fluid.Program):
        @fluid.network("x", "lengths")
        def step(self, x, lengths):
            x, n = _data("x", [-1, -1, 3]), _data("lengths", [-1], "int64")
            h = fluid.layers.sequence_conv(x, 2, 3, lengths=n)
            loss = fluid.layers.mean(fluid.layers.square(
                fluid.layers.sequence_pool(h, "sum", lengths=n)))
            fluid.optimizer.SGD(0.05).minimize(loss)
            return loss
    prog = Train().Compile(seed=0)
    x, n = rng.standard_normal((4, 5, 3)).astype(np.float32), lengths([5, 3, 1, 4])
    losses = [prog.step(x, n) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("call,error", [
    (lambda L, x, n: L.sequence_conv(x, 2, filter_stride=2), "filter_stride must be 1"),
    (lambda L, x, n: L.sequence_conv(x, 0), "num_filters must be an int >= 1"),
    (lambda L, x, n: L.row_conv(n, 2), r"must be a padded batch \[B, T, D\]"),
    (lambda L, x, n: L.sequence_expand(x, x, ref_level=1), "ref_level must be -1 or 0"),
    (lambda L, x, n: L.sequence_concat(x), "must be a non-empty list"),
    (lambda L, x, n: L.sequence_concat([x, x], lengths=[n]), "a list of 2 vars"),
    (lambda L, x, n: L.sequence_enumerate(n, 0), "win_size must be an int >= 1"),
    (lambda L, x, n: L.sequence_slice(x, n, x), "length .* must be int64"),
    (lambda L, x, n: L.sequence_pad(x, 0.0), "pad_value must be a fluid Variable"),
    (lambda L, x, n: L.sequence_mask(n, maxlen=1.5), "maxlen must be a non-negative int"),
    (lambda L, x, n: L.sequence_reshape(x, 0), "new_dim must be an int >= 1"),
])
def test_layer_errors_name_the_line(call, error):
    import fluid
    from fluid_interactive.errors import OpArgumentError

    class Bad(fluid.Program):
        @fluid.network("x", "lengths")
        def f(self, x, lengths):
            x, n = _data("x", [-1, -1, 4]), _data("lengths", [-1], "int64")
            return call(fluid.layers, x, n)
    with pytest.raises((OpArgumentError, ShapeError), match=error) as info:
        Bad().Compile()
    assert "test_sequence2_ops.py" in str(info.value)


def test_sequence_mask_of_any_rank_and_a_maxlen_var():
    n = np.array([[2, 0], [3, 1]], np.int64)
    got = run_forward("sequence_mask", {"X": n, "MaxLenTensor": np.array([4])},
                      {"out_dtype": "float32"})["Y"][0]
    np.testing.assert_array_equal(got, np.arange(4) < n[..., None])
    check_op("sequence_mask", {"X": n}, {"maxlen": 3, "out_dtype": "int64"},
             reference=lambda X, **_: (np.arange(3) < X[..., None]).astype(np.int64),
             batch_unknown=False)
