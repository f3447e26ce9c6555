"""The linear-chain CRF ops (linear_chain_crf, crf_decoding) and chunk_eval: the forward
against Paddle's unit-test references rewritten here (on padded batches with lengths),
against brute-force enumeration of every tag path on tiny cases, stability on long
sequences, and the gradients against finite differences with lengths shorter than T and
padding that holds large values."""
import itertools

import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import DTypeError, ShapeError

# --- references ---------------------------------------------------------------------------------


def paddle_crf_forward(x, w, labels):
    """Paddle's reference for one sequence: the scaled forward recursion, returning the
    negative log-likelihood and its normalised alpha."""
    tags = x.shape[1]
    a, b, trans = w[0], w[1], w[2:]
    row_max = x.max(1, keepdims=True)
    x_exps = np.exp(x - row_max)
    alpha = np.zeros_like(x)
    alpha[0] = np.exp(a) * x_exps[0]
    s = alpha[0].sum()
    alpha[0] /= s
    ll = -row_max[0, 0] - np.log(s)
    for k in range(1, len(x)):
        for i in range(tags):
            alpha[k, i] = x_exps[k, i] * sum(alpha[k - 1, j] * np.exp(trans[j, i])
                                            for j in range(tags))
        s = alpha[k].sum()
        alpha[k] /= s
        ll -= row_max[k, 0] + np.log(s)
    ll -= np.log((alpha[-1] * np.exp(b)).sum())
    ll += a[labels[0]] + x[0, labels[0]] + b[labels[-1]]
    for k in range(1, len(x)):
        ll += x[k, labels[k]] + trans[labels[k - 1], labels[k]]
    return -ll, alpha


def path_score(x, w, path):
    s = w[0][path[0]] + w[1][path[-1]] + sum(x[t, p] for t, p in enumerate(path))
    return s + sum(w[2 + path[t - 1], path[t]] for t in range(1, len(path)))


def brute_force(x, w, labels):
    """-log P(labels) and the best path, by enumerating every tag path."""
    tags = x.shape[1]
    paths = list(itertools.product(range(tags), repeat=len(x)))
    scores = np.array([path_score(x, w, p) for p in paths])
    log_z = np.log(np.exp(scores - scores.max()).sum()) + scores.max()
    return log_z - path_score(x, w, labels), np.array(paths[int(scores.argmax())])


def padded_batch(rng, lengths, tags, t=None, pad=0.0):
    """Emission [B, T, D] uniform in (-1, 1) with ``pad`` past each length, gold tags
    [B, T] (99 past each length: never read)."""
    t = t or max(lengths)
    x = rng.uniform(-1, 1, (len(lengths), t, tags))
    y = rng.integers(0, tags, (len(lengths), t))
    for i, n in enumerate(lengths):
        x[i, n:] = pad
        y[i, n:] = 99
    return x, y


def crf_ref(Emission, Transition, Label, Length=None, **a):
    lengths = Length if Length is not None else [Emission.shape[1]] * len(Emission)
    ll = np.zeros((len(Emission), 1))
    alpha = np.zeros(Emission.shape)
    for i, n in enumerate(np.reshape(lengths, -1)):
        if n:
            ll[i, 0], alpha[i, :n] = paddle_crf_forward(Emission[i, :n], Transition,
                                                        Label.reshape(len(Emission), -1)[i, :n])
    return ll, alpha


# --- linear_chain_crf ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1])
def test_linear_chain_crf_matches_paddles_reference(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, 3)                # Paddle's test: 3 rows, 17 tags, T <= 5
    x, y = padded_batch(rng, lengths, 17)
    w = rng.uniform(-0.5, 0.5, (19, 17))
    got = check_op("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y,
                                        "Length": lengths.astype("int64")})
    ll, alpha = crf_ref(x, w, y, lengths)
    np.testing.assert_allclose(got["LogLikelihood"][0], ll, rtol=1e-10)
    log_alpha = got["Alpha"][0]
    for i, n in enumerate(lengths):      # Paddle's Alpha is ours, exponentiated, normalised
        norm = np.exp(log_alpha[i, :n] - log_alpha[i, :n].max(1, keepdims=True))
        np.testing.assert_allclose(norm / norm.sum(1, keepdims=True), alpha[i, :n],
                                   rtol=1e-10)


def test_linear_chain_crf_matches_brute_force_with_lengths(rng):
    lengths = np.array([4, 1, 3, 0, 2])
    x, y = padded_batch(rng, lengths, 3, t=4, pad=7.0)
    x *= 3
    w = rng.standard_normal((5, 3))
    got = run_forward("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y,
                                           "Length": lengths})["LogLikelihood"][0]
    for i, n in enumerate(lengths):
        want = brute_force(x[i, :n], w, y[i, :n])[0] if n else 0.0
        np.testing.assert_allclose(got[i, 0], want, rtol=1e-10, atol=1e-12)


def test_linear_chain_crf_without_length_is_full_length(rng):
    x, y = padded_batch(rng, [3, 3], 4)
    w = rng.standard_normal((6, 4))
    y3 = y[:, :, None]                        # [B, T, 1] labels are accepted too
    got = check_op("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y3})
    for i in range(2):
        np.testing.assert_allclose(got["LogLikelihood"][0][i, 0],
                                   brute_force(x[i], w, y[i])[0], rtol=1e-10)


def test_linear_chain_crf_is_stable_on_long_sequences(rng):
    """2000 steps of large scores in float32: finite, and equal to a float64 recursion."""
    t, tags = 2000, 5
    x = (rng.standard_normal((2, t, tags)) * 30).astype("float32")
    w = (rng.standard_normal((tags + 2, tags)) * 10).astype("float32")
    y = rng.integers(0, tags, (2, t))
    lengths = np.array([t, 1500])
    got = run_forward("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y,
                                           "Length": lengths})["LogLikelihood"][0]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for i, n in enumerate(lengths):
        a = w64[0] + x64[i, 0]
        for k in range(1, n):
            s = a[:, None] + w64[2:]
            a = s.max(0) + np.log(np.exp(s - s.max(0)).sum(0)) + x64[i, k]
        z = a + w64[1]
        log_z = z.max() + np.log(np.exp(z - z.max()).sum())
        want = log_z - path_score(x64[i, :n], w64, y[i, :n])
        assert np.isfinite(got[i, 0])
        np.testing.assert_allclose(got[i, 0], want, rtol=1e-4)


def test_linear_chain_crf_gradient_with_lengths_and_padding(rng):
    """Lengths shorter than T and 5.0 in the padding: an op that read the padding would
    get a different loss and gradient there (finite differences see only valid steps)."""
    lengths = np.array([4, 2, 3])
    x, y = padded_batch(rng, lengths, 3, t=4, pad=5.0)
    w = rng.standard_normal((5, 3)) * 0.5
    ins = {"Emission": x, "Transition": w, "Label": y, "Length": lengths}
    check_grad("linear_chain_crf", ins, wrt=["Emission", "Transition"],
               through=["LogLikelihood"], max_elements=60)
    padded = run_forward("linear_chain_crf", ins)["LogLikelihood"][0]
    x2 = x.copy()
    x2[1, 2:] = -1e30
    x2[2, 3] = np.nan
    again = run_forward("linear_chain_crf", dict(ins, Emission=x2))["LogLikelihood"][0]
    np.testing.assert_array_equal(padded, again)


def test_linear_chain_crf_gradient_without_length(rng):
    x, y = padded_batch(rng, [3, 3], 4)
    w = rng.standard_normal((6, 4))
    check_grad("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y},
               wrt=["Emission", "Transition"], through=["LogLikelihood"], max_elements=30)


def test_linear_chain_crf_errors():
    x, w, y = np.zeros((2, 3, 4)), np.zeros((6, 4)), np.zeros((2, 3), "int64")
    with pytest.raises(ShapeError, match=r"Transition must be \[D \+ 2, D\]"):
        check_op("linear_chain_crf", {"Emission": x, "Transition": np.zeros((4, 4)),
                                      "Label": y})
    with pytest.raises(ShapeError, match=r"padded batch \[B, T, D\]"):
        check_op("linear_chain_crf", {"Emission": x[0], "Transition": w, "Label": y[0]})
    with pytest.raises(DTypeError, match="Label must hold integer"):
        check_op("linear_chain_crf", {"Emission": x, "Transition": w, "Label": x[..., 0]})
    with pytest.raises(ShapeError, match=r"one tag per step"):
        check_op("linear_chain_crf", {"Emission": x, "Transition": w,
                                      "Label": np.zeros((2, 2), "int64")})
    with pytest.raises(ValueError, match="tag 4 is out of range"):
        run_forward("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y + 4})
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        run_forward("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y,
                                         "Length": np.array([4, 1])})


# --- crf_decoding -------------------------------------------------------------------------------

def paddle_viterbi(x, w):
    """Paddle's decoding reference for one sequence."""
    tags = x.shape[1]
    alpha = np.zeros_like(x)
    track = np.zeros(x.shape, "int64")
    alpha[0] = w[0] + x[0]
    for k in range(1, len(x)):
        for i in range(tags):
            scores = alpha[k - 1] + w[2:, i]
            track[k, i] = int(np.argmax(scores))
            alpha[k, i] = scores.max() + x[k, i]
    path = np.zeros(len(x), "int64")
    path[-1] = int(np.argmax(alpha[-1] + w[1]))
    for k in range(len(x) - 1, 0, -1):
        path[k - 1] = track[k, path[k]]
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crf_decoding_matches_paddles_reference(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 11, 3)               # Paddle's test: 3 rows, 17 tags, T <= 10
    x, _ = padded_batch(rng, lengths, 17, pad=3.0)
    w = rng.uniform(-0.5, 0.5, (19, 17))

    def ref(Emission, Transition, Length, **a):
        out = np.zeros(Emission.shape[:2], "int64")
        for i, n in enumerate(Length):
            out[i, :n] = paddle_viterbi(Emission[i, :n], Transition)
        return out
    check_op("crf_decoding", {"Emission": x, "Transition": w, "Length": lengths},
             reference=ref)


def test_crf_decoding_matches_brute_force(rng):
    lengths = np.array([4, 2, 0, 3])
    x, _ = padded_batch(rng, lengths, 3, t=4, pad=100.0)
    w = rng.standard_normal((5, 3))
    path = run_forward("crf_decoding", {"Emission": x * 2, "Transition": w,
                                        "Length": lengths})["ViterbiPath"][0]
    for i, n in enumerate(lengths):
        if n:
            np.testing.assert_array_equal(path[i, :n], brute_force(x[i, :n] * 2, w,
                                                                   [0] * n)[1])
        assert (path[i, n:] == 0).all()


def test_crf_decoding_with_label_marks_agreement(rng):
    """Paddle's test: with these scores the best tag is always the last one."""
    tags, lengths = 5, np.array([1, 2, 3, 4])
    w = np.repeat(np.arange(tags, dtype="float64").reshape(1, tags), tags + 2, axis=0)
    x = np.repeat(np.arange(tags, dtype="float64").reshape(1, 1, tags), 4, axis=0)
    x = np.repeat(x, 4, axis=1)
    labels = rng.integers(0, tags, (4, 4))
    want = (labels == tags - 1).astype("int64") * (np.arange(4) < lengths[:, None])
    check_op("crf_decoding", {"Emission": x, "Transition": w, "Label": labels,
                              "Length": lengths}, reference=lambda **a: want)
    full = check_op("crf_decoding", {"Emission": x, "Transition": w, "Label": labels[:, :, None]})
    np.testing.assert_array_equal(full["ViterbiPath"][0], labels == tags - 1)
