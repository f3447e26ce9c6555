"""The metric ops: chunk_eval against Paddle's segment rules written out per sequence (and
against the chunk counts of Paddle's own test generator), auc against Paddle's bucketed
statistics (ROC) and a precision-recall reference, accuracy's top-k count."""
import numpy as np
import pytest
from ops.harness import check_op, run_forward

from fluid_interactive.errors import ShapeError

# --- chunk_eval ---------------------------------------------------------------------------------

SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1), "IOBES": (4, 0, 1, 2, 3),
           "plain": (1, -1, -1, -1, -1)}


def segments(labels, scheme, num_types):
    """Paddle's GetSegments for one sequence, written as a loop over its tags."""
    k, tb, ti, te, ts = SCHEMES[scheme]
    other = num_types

    def ends(pt, pty, t, ty):
        if pty == other:
            return False
        if ty == other or ty != pty:
            return True
        if pt in (tb, ti):
            return t in (tb, ts)
        return pt in (te, ts)

    def begins(pt, pty, t, ty):
        if pty == other:
            return ty != other
        if ty == other:
            return False
        if ty != pty or t in (tb, ts):
            return True
        return t in (ti, te) and pt in (te, ts)

    out, start, in_chunk, tag, typ = [], 0, False, -1, other
    for i, lab in enumerate(labels):
        pt, pty = tag, typ
        tag, typ = lab % k, lab // k
        if in_chunk and ends(pt, pty, tag, typ):
            out.append((start, i - 1, pty))
            in_chunk = False
        if begins(pt, pty, tag, typ):
            start, in_chunk = i, True
    if in_chunk:
        out.append((start, len(labels) - 1, typ))
    return out


def ref_chunk_eval(infer, label, lengths, scheme, num_types, excluded):
    n_i = n_l = n_c = 0
    for row_i, row_l, n in zip(infer, label, lengths):
        si = segments(list(row_i[:n]), scheme, num_types)
        sl = segments(list(row_l[:n]), scheme, num_types)
        n_c += len([s for s in set(si) & set(sl) if s[2] not in excluded])
        n_i += len([s for s in si if s[2] not in excluded])
        n_l += len([s for s in sl if s[2] not in excluded])
    p = n_c / n_i if n_i else 0.0
    r = n_c / n_l if n_l else 0.0
    f1 = 2 * p * r / (p + r) if n_c else 0.0
    return p, r, f1, n_i, n_l, n_c


OUTS = ("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
        "NumCorrectChunks")


@pytest.mark.parametrize("scheme,num_types,excluded", [
    ("IOB", 2, []), ("IOE", 3, [1]), ("IOBES", 3, []), ("IOBES", 2, [0]), ("plain", 3, []),
    ("IOB", 1, [])])
def test_chunk_eval_matches_paddles_segment_rules(rng, scheme, num_types, excluded):
    k = SCHEMES[scheme][0]
    b, t = 6, 12
    lengths = np.array([12, 0, 5, 9, 1, 12])
    # tags drawn with many O's, so chunks of every kind appear, and near-copies for the
    # label so that many chunks agree
    infer = rng.integers(0, num_types * k + 1, (b, t))
    infer[rng.random((b, t)) < 0.3] = num_types * k
    label = infer.copy()
    flip = rng.random((b, t)) < 0.25
    label[flip] = rng.integers(0, num_types * k + 1, flip.sum())
    for i, n in enumerate(lengths):
        infer[i, n:], label[i, n:] = -1, 1000               # padding: never read
    attrs = {"num_chunk_types": num_types, "chunk_scheme": scheme,
             "excluded_chunk_types": excluded}
    got = check_op("chunk_eval", {"Inference": infer[:, :, None], "Label": label[:, :, None],
                                  "SeqLength": lengths}, attrs, batch_unknown=False)
    want = ref_chunk_eval(infer, label, lengths, scheme, num_types, excluded)
    assert want[5] > 0 and want[3] != want[5]
    for slot, w in zip(OUTS, want):
        np.testing.assert_allclose(got[slot][0], w, rtol=1e-6)
        assert got[slot][0].shape == ()


def fill_iob(data, chunks, k):
    """Paddle's test generator, IOB only: each chunk (type, start, end) written in."""
    for ty, s, e in chunks:
        data[s] = ty * k
        data[s + 1:e + 1] = ty * k + 1


def test_chunk_eval_counts_of_paddles_generator(rng):
    """Paddle's test: 9 label chunks, 5 inferred, 4 of them correct, in 5 sequences."""
    k, types = 2, 2
    total = 50
    starts = sorted(rng.choice(np.arange(1, total), 4, replace=False).tolist() + [0, total])
    begins = sorted(rng.choice(np.arange(total), 10, replace=False))
    chunks = []
    for j, s in enumerate(begins):
        seq_end = min(e for e in starts if e > s)
        nxt = begins[j + 1] if j + 1 < len(begins) and begins[j + 1] < seq_end else seq_end
        chunks.append((int(rng.integers(types)), s, int(rng.integers(s, nxt))))
    order = rng.permutation(10)
    correct, infer_only, label_only = order[:4], order[4:5], order[5:10]
    infer = np.full(total, types * k)
    label = infer.copy()
    fill_iob(infer, [chunks[i] for i in sorted(np.r_[correct, infer_only])], k)
    fill_iob(label, [chunks[i] for i in sorted(np.r_[correct, label_only])], k)
    lengths = np.diff(starts)
    t = lengths.max()
    pad_i, pad_l = np.full((5, t), -1), np.full((5, t), -1)
    for i, (s, n) in enumerate(zip(starts, lengths)):
        pad_i[i, :n], pad_l[i, :n] = infer[s:s + n], label[s:s + n]
    got = run_forward("chunk_eval", {"Inference": pad_i, "Label": pad_l, "SeqLength": lengths},
                      {"num_chunk_types": types})
    assert [int(got[s][0]) for s in OUTS[3:]] == [5, 9, 4]
    np.testing.assert_allclose([got[s][0] for s in OUTS[:3]],
                               [4 / 5, 4 / 9, 2 * (4 / 5) * (4 / 9) / (4 / 5 + 4 / 9)],
                               rtol=1e-6)


def test_chunk_eval_without_lengths_and_empty():
    ids = np.array([[4, 4, 4]])
    got = run_forward("chunk_eval", {"Inference": ids, "Label": ids}, {"num_chunk_types": 2})
    assert [float(got[s][0]) for s in OUTS] == [0.0] * 6


def test_chunk_eval_errors():
    ids = np.zeros((2, 3), "int64")
    with pytest.raises(ShapeError, match="chunk_scheme must be one of"):
        check_op("chunk_eval", {"Inference": ids, "Label": ids}, {"chunk_scheme": "BIO"})
    with pytest.raises(ShapeError, match=r"same \[B, T\]"):
        check_op("chunk_eval", {"Inference": ids, "Label": ids[:, :2]})
    with pytest.raises(ValueError, match="tag id 9 is out of range"):
        run_forward("chunk_eval", {"Inference": ids + 9, "Label": ids},
                    {"num_chunk_types": 2})
