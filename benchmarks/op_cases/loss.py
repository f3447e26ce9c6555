"""Cases of the losses, structured-prediction and metric ops added for Paddle 1.8, each
against the NumPy a careful person would write for it: vectorised, log-space recursions
for the CRF and CTC (a loop over time only), the samplers' draws from the same seed."""
from __future__ import annotations

import numpy as np

import fluid

from . import OpCase, f32, i64

L = fluid.layers
N, D = 512, 512            # elementwise losses: 262144 elements
R = 262144                 # [R, 1] losses


def _softplus(d):
    return np.maximum(d, 0) + np.log1p(np.exp(-np.abs(d)))


def _lse(a, axis):
    m = a.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _init(value):
    return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(value))


# --- elementwise and row losses ----------------------------------------------------------------

def _huber(x, y):
    r = y - x
    a = np.abs(r)
    return np.where(a <= 1.0, 0.5 * r * r, a - 0.5)


def _smooth_l1(x, y):
    d = x - y
    a = np.abs(d)
    return np.where(a < 1.0, 0.5 * d * d, a - 0.5).sum(axis=1, keepdims=True)


def _kldiv(x, t):
    return np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0).mean(dtype=np.float32)


def _log_loss(p, lab):
    return -lab * np.log(p + 1e-4) - (1 - lab) * np.log(1 - p + 1e-4)


def _teacher_student(x, lab):
    sp = _softplus(x)
    return np.where(lab < -1, sp, np.where(lab < 0, sp - x, 2 * sp - x * lab))


def _bpr(x, lab):
    pos = np.take_along_axis(x, lab, 1)
    sp = _softplus(x - pos)
    return (sp.sum(1, keepdims=True) - np.take_along_axis(sp, lab, 1)) / (x.shape[1] - 1)


def _dice(x, lab):
    onehot = np.eye(x.shape[-1], dtype=x.dtype)[lab[..., 0]]
    axes = tuple(range(1, x.ndim))
    inse = (x * onehot).sum(axes)
    return (1 - 2 * inse / (x.sum(axes) + onehot.sum(axes) + 1e-5)).mean()


def _npair(a, p, lab):
    t = (lab[:, None] == lab[None, :]).astype(a.dtype)
    t /= t.sum(1, keepdims=True)
    l2 = ((a * a).sum(1).mean() + (p * p).sum(1).mean()) * 0.25 * 0.002
    sim = a @ p.T
    logp = sim - _lse(sim, 1)[:, None]
    ce = -(t * logp).sum(1, keepdims=True)
    return l2 + (t * ce).sum(0).mean()


CENTERS = f32(16, 64, seed=5)


def _center(x, lab):
    d = x - CENTERS[lab[:, 0]]
    return 0.5 * (d * d).sum(1, keepdims=True)


prob = f32(R, 1, low=0.05, high=0.95)
ts_label = np.random.default_rng(2).choice([-2.0, -1.0, 0.3, 1.7], (R, 1)).astype("float32")
onehot_rows = np.eye(D, dtype="float32")[i64(N, high=D)]
prior = np.full((1, D), 1.0 / D, "float32")
dice_in = np.random.default_rng(3).dirichlet(np.ones(8), (64, 64, 16)).astype("float32")

CASES = [
    OpCase("huber_loss", {"x": f32(N, D), "y": f32(N, D, seed=1)},
           layer=lambda x, y: L.huber_loss(x, y, delta=1.0), numpy=_huber),
    OpCase("smooth_l1_loss", {"x": f32(N, D), "y": f32(N, D, seed=1)},
           layer=lambda x, y: L.smooth_l1(x, y), numpy=_smooth_l1, rtol=1e-4),
    OpCase("mse_loss", {"x": f32(N, D), "y": f32(N, D, seed=1)},
           layer=lambda x, y: L.mse_loss(x, y),
           numpy=lambda x, y: np.square(x - y).mean(dtype=np.float32), rtol=1e-4),
    OpCase("kldiv_loss", {"x": f32(N, D), "t": f32(N, D, seed=1, low=0.0)},
           layer=lambda x, t: L.kldiv_loss(x, t), numpy=_kldiv, rtol=1e-4),
    OpCase("log_loss", {"p": prob, "lab": f32(R, 1, seed=1, low=0.0)},
           layer=lambda p, lab: L.log_loss(p, lab), numpy=_log_loss, rtol=1e-4),
    OpCase("teacher_student_sigmoid_loss", {"x": f32(R, 1), "lab": ts_label},
           layer=lambda x, lab: L.teacher_student_sigmoid_loss(x, lab),
           numpy=_teacher_student, rtol=1e-4),
    OpCase("label_smooth", {"lab": onehot_rows, "prior": prior},
           layer=lambda lab, p: L.label_smooth(lab, prior_dist=p, epsilon=0.1),
           numpy=lambda lab, p: 0.9 * lab + 0.1 * p),
    OpCase("rank_loss", {"lab": f32(R, 1, low=0.0), "a": f32(R, 1, seed=1),
                         "b": f32(R, 1, seed=2)},
           layer=lambda lab, a, b: L.rank_loss(lab, a, b),
           numpy=lambda lab, a, b: _softplus(a - b) - lab * (a - b), rtol=1e-4),
    OpCase("margin_rank_loss", {"lab": np.sign(f32(R, 1)), "a": f32(R, 1, seed=1),
                                "b": f32(R, 1, seed=2)},
           layer=lambda lab, a, b: L.margin_rank_loss(lab, a, b, margin=0.1),
           numpy=lambda lab, a, b: np.maximum(-lab * (a - b) + 0.1, 0)),
    OpCase("bpr_loss", {"x": f32(4096, 64), "lab": i64(4096, 1, high=64)},
           layer=lambda x, lab: L.bpr_loss(x, lab), numpy=_bpr, rtol=1e-4),
    OpCase("dice_loss", {"x": dice_in, "lab": i64(64, 64, 16, 1, high=8)},
           layer=lambda x, lab: L.dice_loss(x, lab), numpy=_dice, rtol=1e-4),
    OpCase("npair_loss", {"a": f32(256, 64), "p": f32(256, 64, seed=1),
                          "lab": i64(256, high=32)},
           layer=lambda a, p, lab: L.npair_loss(a, p, lab), numpy=_npair, rtol=1e-4),
    OpCase("center_loss", {"x": f32(4096, 64), "lab": i64(4096, 1, high=16)},
           layer=lambda x, lab: L.center_loss(x, lab, 16, 0.1, _init(CENTERS)),
           numpy=_center, rtol=1e-4),
]


# --- sequences: CRF, CTC, decoding, edit distance, chunks ---------------------------------------

B, T, TAGS = 32, 60, 20
crf_x = f32(B, T, TAGS)
crf_w = f32(TAGS + 2, TAGS, seed=1)
crf_y = i64(B, T, high=TAGS)
crf_n = np.random.default_rng(4).integers(T // 2, T + 1, B).astype("int64")


def _crf_nll(x, y, n):
    """The negative log-likelihood of a linear-chain CRF, log space, over the batch."""
    b, t, _ = x.shape
    start, end, trans = crf_w[0], crf_w[1], crf_w[2:]
    valid = np.arange(t) < n[:, None]
    alpha = start + x[:, 0]
    for k in range(1, t):
        new = _lse(alpha[:, :, None] + trans, 1) + x[:, k]
        alpha = np.where(valid[:, k:k + 1], new, alpha)
    log_z = _lse(alpha + end, 1)
    yv = np.where(valid, y, 0)
    emit = (np.take_along_axis(x, yv[:, :, None], 2)[:, :, 0] * valid).sum(1)
    steps = (trans[yv[:, :-1], yv[:, 1:]] * valid[:, 1:]).sum(1)
    score = emit + steps + start[yv[:, 0]] + end[yv[np.arange(b), n - 1]]
    return (log_z - score)[:, None]


def _viterbi(x, n):
    b, t, _ = x.shape
    start, end, trans = crf_w[0], crf_w[1], crf_w[2:]
    score = start + x[:, 0]
    track = np.zeros(x.shape, np.int64)
    for k in range(1, t):
        s = score[:, :, None] + trans
        track[:, k] = s.argmax(1)
        score = np.where((k < n)[:, None], s.max(1) + x[:, k], score)
    path = np.zeros((b, t), np.int64)
    last = (score + end).argmax(1)
    cur = np.zeros(b, np.int64)
    rows = np.arange(b)
    for k in range(t - 1, -1, -1):
        back = track[rows, k + 1, cur] if k + 1 < t else cur
        cur = np.where(k == n - 1, last, np.where(k < n - 1, back, 0))
        path[:, k] = cur
    return path


CB, CT, CC, CL = 16, 100, 30, 20
ctc_x = f32(CB, CT, CC)
ctc_y = np.random.default_rng(6).integers(1, CC, (CB, CL)).astype("int64")
ctc_n = np.random.default_rng(7).integers(CT // 2, CT + 1, CB).astype("int64")
ctc_m = np.random.default_rng(8).integers(CL // 2, CL + 1, CB).astype("int64")


def _ctc(x, y, n, m):
    """CTC loss, log space: the lattice of each row's label with blanks, one frame at a
    time over the whole batch; 0 where the label cannot fit."""
    b, t, _ = x.shape
    logp = x - _lse(x, 2)[:, :, None]
    s = 2 * y.shape[1] + 1
    ext = np.zeros((b, s), np.int64)
    ext[:, 1::2] = np.where(np.arange(y.shape[1]) < m[:, None], y, 0)
    lp = np.take_along_axis(logp, np.broadcast_to(ext[:, None, :], (b, t, s)), 2)
    lp = np.where((np.arange(s) < 2 * m[:, None] + 1)[:, None, :], lp, -np.inf)
    skip = np.zeros((b, s), bool)
    skip[:, 2:] = (ext[:, 2:] != 0) & (ext[:, 2:] != ext[:, :-2])
    alpha = np.full((b, s), -np.inf)
    alpha[:, :2] = lp[:, 0, :2]
    for k in range(1, t):
        one = np.concatenate([np.full((b, 1), -np.inf), alpha[:, :-1]], 1)
        two = np.concatenate([np.full((b, 2), -np.inf), alpha[:, :-2]], 1)
        new = np.logaddexp(np.logaddexp(alpha, one), np.where(skip, two, -np.inf)) + lp[:, k]
        alpha = np.where((k < n)[:, None], new, alpha)
    rows = np.arange(b)
    ll = np.logaddexp(alpha[rows, 2 * m], alpha[rows, 2 * m - 1])
    return np.where(np.isfinite(ll), -ll, 0)[:, None].astype(x.dtype)


def _greedy(x, n):
    best = x.argmax(2)
    t = best.shape[1]
    keep = (best != 0) & (np.arange(t) < n[:, None])
    keep[:, 1:] &= best[:, 1:] != best[:, :-1]
    out = np.zeros((best.shape[0], t + 1), np.int64)
    out[np.arange(len(best))[:, None], np.where(keep, keep.cumsum(1) - 1, t)] = best
    return out[:, :t], keep.sum(1)[:, None]


EB, ET = 64, 40
hyps = i64(EB, ET, high=8)
refs = i64(EB, ET, high=8, seed=1)
hyp_n = np.random.default_rng(9).integers(1, ET + 1, EB).astype("int64")
ref_n = np.random.default_rng(10).integers(1, ET + 1, EB).astype("int64")


def _edit(h, r, m, n):
    """Levenshtein rows over the batch; the insertions along a row as a running minimum."""
    b, tr = r.shape
    cols = np.arange(tr + 1)
    row = np.broadcast_to(cols, (b, tr + 1))
    rows = np.arange(b)
    dist = row[rows, n]
    for i in range(1, h.shape[1] + 1):
        a = np.empty((b, tr + 1), np.int64)
        a[:, 0] = i
        a[:, 1:] = np.minimum(row[:, 1:] + 1, row[:, :-1] + (h[:, i - 1:i] != r))
        row = cols + np.minimum.accumulate(a - cols, axis=1)
        dist = np.where(m == i, row[rows, n], dist)
    return (dist / n)[:, None].astype("float32")


CHB, CHT = 64, 80
tags_o = np.where(np.random.default_rng(11).random((CHB, CHT)) < 0.4, 6,
                  i64(CHB, CHT, high=6, seed=12))
tags_l = np.where(np.random.default_rng(13).random((CHB, CHT)) < 0.2,
                  i64(CHB, CHT, high=7, seed=14), tags_o)


def _chunks(ids, k=2, other=3):
    """IOB chunk ends [B, T] with each chunk's start and type (in IOB a chunk starts and
    ends by the tag at hand alone: B starts one)."""
    tag, typ = ids % k, ids // k
    b = len(ids)
    pty = np.concatenate([np.full((b, 1), other), typ], 1)
    t = np.concatenate([tag, np.full((b, 1), -1)], 1)
    ty = np.concatenate([typ, np.full((b, 1), other)], 1)
    begins = (ty != other) & ((pty == other) | (ty != pty) | (t == 0))
    ends = (pty != other) & ((ty == other) | (ty != pty) | (t == 0))
    start = np.maximum.accumulate(np.where(begins[:, :-1], np.arange(ids.shape[1]), -1), 1)
    return ends[:, 1:], start, typ


def _chunk_f1(o, lab):
    e_o, s_o, t_o = _chunks(o)
    e_l, s_l, t_l = _chunks(lab)
    correct = (e_o & e_l & (s_o == s_l) & (t_o == t_l)).sum()
    p, r = correct / max(e_o.sum(), 1), correct / max(e_l.sum(), 1)
    return np.float32(2 * p * r / (p + r) if correct else 0.0)


AUC_N = 65536
auc_p = f32(AUC_N, 1, low=0.0)
auc_y = (np.random.default_rng(15).random((AUC_N, 1)) < auc_p).astype("int64")


AUC_SEEN = np.zeros((2, 4096), np.int64)     # the counts of every call so far


def _roc_area(pos, neg):
    pos, neg = pos[::-1], neg[::-1]
    tp = np.cumsum(pos)
    return (neg * (2 * tp - pos)).sum() / 2 / (tp[-1] * neg.sum())


def _auc(p, y, nt=4095):
    """What fluid.layers.auc returns: the AUC of every call so far and of this one."""
    key = 2 * (p[:, 0] * nt).astype(np.int64) + (y[:, 0] > 0)   # labels here are 0 or 1
    counts = np.bincount(key, minlength=2 * (nt + 1)).reshape(nt + 1, 2).T[::-1]
    AUC_SEEN[...] = counts            # a first call: all the calls so far are this one
    return _roc_area(*AUC_SEEN), _roc_area(*counts)


CASES += [
    OpCase("linear_chain_crf", {"x": crf_x, "y": crf_y, "n": crf_n},
           layer=lambda x, y, n: L.linear_chain_crf(x, y, param_attr=_init(crf_w), length=n),
           numpy=_crf_nll, rtol=1e-4, atol=1e-4),
    OpCase("crf_decoding", {"x": crf_x, "n": crf_n},
           layer=lambda x, n: L.crf_decoding(x, L.create_parameter(
               [TAGS + 2, TAGS], "float32", name="crfw",
               default_initializer=fluid.initializer.NumpyArrayInitializer(crf_w)).name,
               length=n),
           numpy=_viterbi),
    OpCase("warpctc", {"x": ctc_x, "y": ctc_y, "n": ctc_n, "m": ctc_m},
           layer=lambda x, y, n, m: L.warpctc(x, y, input_length=n, label_length=m),
           numpy=_ctc, rtol=1e-4, atol=1e-3),
    OpCase("ctc_greedy_decoder", {"x": ctc_x, "n": ctc_n},
           layer=lambda x, n: L.ctc_greedy_decoder(x, blank=0, input_length=n),
           numpy=_greedy),
    OpCase("edit_distance", {"h": hyps, "r": refs, "m": hyp_n, "n": ref_n},
           layer=lambda h, r, m, n: L.edit_distance(h, r, input_length=m, label_length=n)[0],
           numpy=_edit),
    OpCase("chunk_eval", {"o": tags_o, "lab": tags_l},
           layer=lambda o, lab: L.chunk_eval(o, lab, "IOB", 3)[2], numpy=_chunk_f1),
    OpCase("auc", {"p": auc_p, "y": auc_y},
           layer=lambda p, y: L.auc(p, y)[:2], numpy=_auc, rtol=1e-10),
]


# --- sampled and tree losses (the draws from the same seed) -------------------------------------

SN, SD, SC, NEG = 4096, 64, 1000, 10
nce_w, nce_b = f32(SC, SD, seed=16), f32(SC, 1, seed=17)


def _nce(x, y):
    u = np.random.default_rng(1).random((len(x), NEG))
    labels = np.concatenate([y, np.minimum(np.floor(u * SC), SC - 1).astype(np.int64)], 1)
    z = np.einsum("nd,nsd->ns", x, nce_w[labels]) + nce_b[labels, 0]
    log_o = -_softplus(-z)
    log_q = np.log(NEG / SC)
    cost = np.logaddexp(log_o, log_q) - np.where(np.arange(NEG + 1) < 1, log_o, log_q)
    return cost.sum(1, keepdims=True) / (NEG + 1)


hs_w, hs_b = f32(SC - 1, SD, seed=18), f32(SC - 1, 1, seed=19)


def _hsigmoid(x, y):
    length = int(SC - 1).bit_length()
    c = y + SC
    steps = np.arange(length)
    nodes = (c >> (steps + 1)) - 1
    valid = nodes >= 0
    nodes = np.where(valid, nodes, 0)
    bits = ((c >> steps) & 1) * valid
    score = np.einsum("nd,nld->nl", x, hs_w[nodes]) + hs_b[nodes, 0]
    score = np.clip(score * valid, -40, 40)
    return (_softplus(score).sum(1, keepdims=True) - (bits * score).sum(1, keepdims=True))


SS_K, SS_S = 20000, 100


def _sampled_softmax(logits, y):
    from fluid_interactive.ops.sampled_loss import unique_log_uniform
    drawn, tries = unique_log_uniform(np.random.default_rng(1), SS_S, SS_K)
    samples = np.concatenate([y, np.broadcast_to(drawn, (len(y), SS_S))], 1)
    p = np.log((samples + 2.0) / (samples + 1.0)) / np.log(SS_K + 1)
    q = p * SS_S if tries == SS_S else -np.expm1(tries * np.log1p(-p))
    z = np.take_along_axis(logits, samples, 1)
    z[:, 1:] -= 1e20 * (samples[:, 1:] == y)
    z = z - np.log(q)
    return (_lse(z, 1) - z[:, 0])[:, None]


CASES += [
    OpCase("nce", {"x": f32(SN, SD), "y": i64(SN, 1, high=SC)},
           layer=lambda x, y: L.nce(x, y, SC, num_neg_samples=NEG, seed=1,
                                    param_attr=_init(nce_w), bias_attr=_init(nce_b)),
           numpy=_nce, rtol=1e-4, atol=1e-5),
    OpCase("hsigmoid", {"x": f32(SN, SD), "y": i64(SN, 1, high=SC)},
           layer=lambda x, y: L.hsigmoid(x, y, SC, param_attr=_init(hs_w),
                                         bias_attr=_init(hs_b)),
           numpy=_hsigmoid, rtol=1e-4, atol=1e-4),
    OpCase("sampled_softmax_with_cross_entropy",
           {"logits": f32(512, SS_K), "y": i64(512, 1, high=SS_K)},
           layer=lambda logits, y: L.sampled_softmax_with_cross_entropy(logits, y, SS_S,
                                                                        seed=1),
           numpy=_sampled_softmax, rtol=1e-4, atol=1e-4),
]
