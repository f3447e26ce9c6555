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


# --- auc ----------------------------------------------------------------------------------------

def paddle_auc_counts(pred, labels, nt):
    """Paddle's Python Auc metric: bucket counts of one batch."""
    pos, neg = [0] * (nt + 1), [0] * (nt + 1)
    for p, lab in zip(pred[:, -1], labels.reshape(-1)):
        b = int(p * nt)
        if lab:
            pos[b] += 1
        else:
            neg[b] += 1
    return pos, neg


def paddle_auc_eval(pos, neg):
    tot_pos = tot_neg = auc = 0.0
    for idx in range(len(pos) - 1, -1, -1):
        prev_pos, prev_neg = tot_pos, tot_neg
        tot_pos += pos[idx]
        tot_neg += neg[idx]
        auc += abs(tot_neg - prev_neg) * (tot_pos + prev_pos) / 2.0
    return auc / tot_pos / tot_neg if tot_pos > 0 and tot_neg > 0 else 0.0


def pr_auc_reference(pos, neg):
    """Trapezoids under precision over recall, thresholds from the top, from (0, 1)."""
    total = sum(pos)
    tp = fp = 0
    r_prev, p_prev, area = 0.0, 1.0, 0.0
    for idx in range(len(pos) - 1, -1, -1):
        tp += pos[idx]
        fp += neg[idx]
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / total if total else 0.0
        area += (rec - r_prev) * (prec + p_prev) / 2
        r_prev, p_prev = rec, prec
    return area


@pytest.mark.parametrize("slide_steps", [0, 1])
def test_auc_matches_paddles_metric(rng, slide_steps):
    pred = rng.random((128, 2)).astype("float32")
    labels = rng.integers(0, 2, (128, 1))
    nt = 200
    shape = ((1 + slide_steps) * (nt + 1) + 1,) if slide_steps else (1, nt + 1)
    zeros = np.zeros(shape, "int64")
    pos, neg = paddle_auc_counts(pred, labels, nt)
    extra = [1] if slide_steps else []
    want = {"AUC": np.array(paddle_auc_eval(pos, neg)),
            "StatPosOut": np.array(pos * (1 + slide_steps) + extra).reshape(shape),
            "StatNegOut": np.array(neg * (1 + slide_steps) + extra).reshape(shape)}
    check_op("auc", {"Predict": pred, "Label": labels, "StatPos": zeros, "StatNeg": zeros},
             {"curve": "ROC", "num_thresholds": nt, "slide_steps": slide_steps},
             reference=lambda **a: want, rtol=1e-12, batch_unknown=False)


def test_auc_slides_over_the_last_calls(rng):
    """slide_steps=3: the batch AUC covers the last 3 calls' predictions."""
    nt, slide = 50, 3
    stats = [np.zeros((1 + slide) * (nt + 1) + 1, "int64") for _ in range(2)]
    batches = [(rng.random((20, 1)), rng.integers(0, 2, (20, 1))) for _ in range(6)]
    for k, (pred, lab) in enumerate(batches):
        got = run_forward("auc", {"Predict": pred, "Label": lab, "StatPos": stats[0],
                                  "StatNeg": stats[1]},
                          {"num_thresholds": nt, "slide_steps": slide})
        stats = [got["StatPosOut"][0], got["StatNegOut"][0]]
        window = batches[max(0, k - slide + 1):k + 1]
        pos, neg = paddle_auc_counts(np.concatenate([p for p, _ in window]),
                                     np.concatenate([lab for _, lab in window]), nt)
        np.testing.assert_allclose(got["AUC"][0], paddle_auc_eval(pos, neg), rtol=1e-12)
        assert stats[0][-1] == k + 1


def test_auc_pr_curve(rng):
    pred = rng.random((300, 2))
    labels = (rng.random((300, 1)) < pred[:, 1:]).astype("int64")   # informative scores
    nt = 100
    zeros = np.zeros((1, nt + 1), "int64")
    got = run_forward("auc", {"Predict": pred, "Label": labels, "StatPos": zeros,
                              "StatNeg": zeros},
                      {"curve": "PR", "num_thresholds": nt, "slide_steps": 0})["AUC"][0]
    pos, neg = paddle_auc_counts(pred, labels, nt)
    np.testing.assert_allclose(got, pr_auc_reference(pos, neg), rtol=1e-12)
    assert 0.6 < got < 1.0


def test_auc_single_class_and_errors():
    zeros = np.zeros((1, 11), "int64")
    got = run_forward("auc", {"Predict": np.full((4, 1), 0.3), "Label": np.ones((4, 1), "int64"),
                              "StatPos": zeros, "StatNeg": zeros},
                      {"num_thresholds": 10, "slide_steps": 0})
    assert float(got["AUC"][0]) == 0.0
    with pytest.raises(ValueError, match=r"predictions must lie in \[0, 1\]"):
        run_forward("auc", {"Predict": np.full((2, 1), 1.5), "Label": np.ones((2, 1), "int64"),
                            "StatPos": zeros, "StatNeg": zeros},
                    {"num_thresholds": 10, "slide_steps": 0})
    with pytest.raises(ShapeError, match=r"StatPos must be int64 counts \[1, 11\]"):
        check_op("auc", {"Predict": np.ones((2, 1)), "Label": np.ones((2, 1), "int64"),
                         "StatPos": np.zeros(5, "int64"), "StatNeg": zeros},
                 {"num_thresholds": 10, "slide_steps": 0})
    with pytest.raises(ShapeError, match=r"\[N, 1\] or \[N, 2\]"):
        check_op("auc", {"Predict": np.ones((2, 3)), "Label": np.ones((2, 1), "int64"),
                         "StatPos": zeros, "StatNeg": zeros},
                 {"num_thresholds": 10, "slide_steps": 0})
