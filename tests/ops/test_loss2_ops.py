"""Forward, shape-rule and gradient checks of the losses added for Paddle 1.8 (huber_loss,
smooth_l1_loss, kldiv_loss, log_loss, teacher_student_sigmoid_loss, label_smooth,
rank_loss, margin_rank_loss, bpr_loss, center_loss, nce, hierarchical_sigmoid,
sample_logits, warpctc, ctc_align, edit_distance): each forward against the NumPy
reference of Paddle's unit test on that test's inputs and attributes, each gradient
against float64 central differences, and against PyTorch where it has the loss."""
import itertools

import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_grad, check_op, run_forward

from fluid_interactive.errors import ShapeError
from fluid_interactive.ops.interpret import run_ops

torch = pytest.importorskip("torch")
F = torch.nn.functional


def t64(a, grad=True):
    return torch.tensor(np.asarray(a, np.float64), requires_grad=grad)


def grads_of(op_type, inputs, attrs, wrt, out_slot, seed=0):
    """Our op's output ``out_slot`` and the gradients of sum(out * cot) (float64)."""
    inputs = {k: (np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v)
              for k, v in inputs.items()}
    op, env = build_op(op_type, inputs, attrs)
    run_ops([op], env)
    rng = np.random.default_rng(seed)
    cot = {n: (rng.standard_normal(np.shape(env[n])) if slot == out_slot
               else np.zeros(np.shape(env[n])))
           for slot, names in op.outputs.items() for n in names}
    grads = analytic_grads(op, env, cot, wrt)
    out = op.outputs[out_slot][0]
    return env[out], {s: grads[s][0] for s in wrt}, cot[out]


def torch_grads(fn, arrays, cot):
    """fn(*tensors) -> tensor; returns (value, gradients) of sum(value * cot)."""
    ts = [t64(a) for a in arrays]
    y = fn(*ts)
    (y * torch.tensor(np.asarray(cot, np.float64))).sum().backward()
    return y.detach().numpy(), [x.grad.numpy() for x in ts]


def close(a, b, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# --- huber_loss ---------------------------------------------------------------------------------

def ref_huber(X, Y, delta, **a):
    r = Y.astype(np.float64) - X
    return {"Residual": r, "Out": np.where(np.abs(r) <= delta, 0.5 * r * r,
                                           delta * (np.abs(r) - 0.5 * delta))}


@pytest.mark.parametrize("shape", [(100, 1), (64,), (6, 6), (6, 6, 1)])
def test_huber_loss(rng, shape):
    x = rng.uniform(0, 1, shape).astype("float32")
    y = rng.uniform(0, 1, shape).astype("float32")
    check_op("huber_loss", {"X": x, "Y": y}, {"delta": 1.0}, reference=ref_huber)
    check_op("huber_loss", {"X": x, "Y": y}, {"delta": 0.3}, reference=ref_huber)
    check_grad("huber_loss", {"X": x, "Y": y}, {"delta": 0.3}, wrt=["X", "Y"],
               through=["Out"])


def test_huber_loss_matches_torch(rng):
    x, y = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    out, grads, cot = grads_of("huber_loss", {"X": x, "Y": y}, {"delta": 0.7}, ["X", "Y"],
                               "Out")
    want, (gx, gy) = torch_grads(lambda a, b: F.huber_loss(a, b, reduction="none",
                                                           delta=0.7), [x, y], cot)
    close(out, want)
    close(grads["X"], gx)
    close(grads["Y"], gy)


def test_huber_loss_rejects_mismatched_shapes(rng):
    with pytest.raises(ShapeError, match="label Y has shape"):
        check_op("huber_loss", {"X": np.ones((3, 2), "float32"), "Y": np.ones((3, 1), "float32")})


# --- smooth_l1_loss -----------------------------------------------------------------------------

def ref_smooth_l1(X, Y, sigma, InsideWeight=None, OutsideWeight=None, **a):
    s2 = sigma * sigma
    d = X.astype(np.float64) - Y
    if InsideWeight is not None:
        d = d * InsideWeight
    v = np.where(np.abs(d) < 1.0 / s2, 0.5 * d * d * s2, np.abs(d) - 0.5 / s2)
    if OutsideWeight is not None:
        v = v * OutsideWeight
    return {"Diff": d, "Out": v.reshape(len(v), -1).sum(1, keepdims=True)}


@pytest.mark.parametrize("weighted", [False, True])
def test_smooth_l1_loss(rng, weighted):
    dims = (5, 20)
    ins = {"X": rng.random(dims).astype("float32"), "Y": rng.random(dims).astype("float32")}
    if weighted:
        ins["InsideWeight"] = rng.random(dims).astype("float32")
        ins["OutsideWeight"] = rng.random(dims).astype("float32")
    check_op("smooth_l1_loss", ins, {"sigma": 3.0}, reference=ref_smooth_l1)
    check_grad("smooth_l1_loss", ins, {"sigma": 3.0}, wrt=["X", "Y"], through=["Out"])


def test_smooth_l1_loss_matches_torch(rng):
    x, y = rng.standard_normal((6, 3, 2)), rng.standard_normal((6, 3, 2))
    out, grads, cot = grads_of("smooth_l1_loss", {"X": x, "Y": y}, {"sigma": 1.0},
                               ["X", "Y"], "Out")
    want, (gx, gy) = torch_grads(
        lambda a, b: F.smooth_l1_loss(a, b, reduction="none").reshape(6, -1).sum(1, True),
        [x, y], cot)
    close(out, want)
    close(grads["X"], gx)
    close(grads["Y"], gy)


def test_smooth_l1_loss_wants_both_weights(rng):
    x = np.ones((2, 3), "float32")
    with pytest.raises(ShapeError, match="both InsideWeight and OutsideWeight"):
        check_op("smooth_l1_loss", {"X": x, "Y": x, "InsideWeight": x})
    with pytest.raises(ShapeError, match="rank >= 2"):
        check_op("smooth_l1_loss", {"X": x[0], "Y": x[0]})


# --- kldiv_loss ---------------------------------------------------------------------------------

def ref_kldiv(X, Target, reduction, **a):
    with np.errstate(invalid="ignore"):
        out = np.where(Target > 0, Target * (np.log(np.abs(Target)) - X), 0.0)
    return {"none": out, "batchmean": out.sum() / X.shape[0], "mean": out.mean(),
            "sum": out.sum()}[reduction]


@pytest.mark.parametrize("shape,reduction", [((4, 5, 5), "batchmean"), ((3, 2, 7, 7), "none"),
                                             ((2, 3, 5, 7, 9), "mean"), ((5, 20), "sum")])
def test_kldiv_loss(rng, shape, reduction):
    x = rng.uniform(-10, 10, shape)
    target = rng.uniform(-10, 10, shape)
    check_op("kldiv_loss", {"X": x, "Target": target}, {"reduction": reduction},
             reference=ref_kldiv, rtol=1e-9)
    small = tuple(min(d, 3) for d in shape)
    xs, ts = x[tuple(slice(0, d) for d in small)], target[tuple(slice(0, d) for d in small)]
    check_grad("kldiv_loss", {"X": xs, "Target": ts}, {"reduction": reduction})


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("reduction", ["none", "batchmean", "mean", "sum"])
def test_kldiv_loss_matches_torch(rng, reduction):
    x = np.log(rng.dirichlet(np.ones(5), 4))
    target = rng.dirichlet(np.ones(5), 4)
    out, grads, cot = grads_of("kldiv_loss", {"X": x, "Target": target},
                               {"reduction": reduction}, ["X"], "Loss")
    ts = t64(target, grad=False)
    want, (gx,) = torch_grads(lambda a: F.kl_div(a, ts, reduction=reduction), [x], cot)
    close(out, want)
    close(grads["X"], gx)


def test_kldiv_loss_rejects_unknown_reduction():
    with pytest.raises(ShapeError, match="reduction must be one of"):
        check_op("kldiv_loss", {"X": np.ones((2, 2)), "Target": np.ones((2, 2))},
                 {"reduction": "avg"})


# --- log_loss -----------------------------------------------------------------------------------

def test_log_loss(rng):
    p = (1 / (1 + np.exp(-rng.random((100, 1))))).astype("float32")
    lab = rng.integers(0, 2, (100, 1)).astype("float32")
    eps = 1e-7
    check_op("log_loss", {"Predicted": p, "Labels": lab}, {"epsilon": eps},
             reference=lambda Predicted, Labels, epsilon: (
                 -Labels * np.log(Predicted + epsilon)
                 - (1 - Labels) * np.log(1 - Predicted + epsilon)), rtol=1e-5)
    check_grad("log_loss", {"Predicted": p[:20], "Labels": lab[:20]}, {"epsilon": 1e-4},
               wrt=["Predicted"])


def test_log_loss_matches_torch_binary_cross_entropy(rng):
    p, lab = rng.uniform(0.05, 0.95, (7, 1)), rng.uniform(0, 1, (7, 1))
    out, grads, cot = grads_of("log_loss", {"Predicted": p, "Labels": lab}, {"epsilon": 0.0},
                               ["Predicted"], "Loss")
    want, (gp,) = torch_grads(
        lambda a: F.binary_cross_entropy(a, t64(lab, False), reduction="none"), [p], cot)
    close(out, want)
    close(grads["Predicted"], gp)


def test_log_loss_wants_one_column(rng):
    with pytest.raises(ShapeError, match=r"\[N, 1\]"):
        check_op("log_loss", {"Predicted": np.ones((3, 2), "float32"),
                              "Labels": np.ones((3, 2), "float32")})


# --- teacher_student_sigmoid_loss ---------------------------------------------------------------

def ref_teacher_student(X, Label, **a):
    out = []
    for x, lab in zip(X[:, 0], Label[:, 0]):
        sp = max(x, 0.0) + np.log(1.0 + np.exp(-abs(x)))
        if lab < -1.0:
            out.append(sp)
        elif lab < 0.0:
            out.append(sp - x)
        elif lab < 1.0:
            out.append(2 * sp - x * lab)
        else:
            out.append(sp - x + sp - x * (lab - 1.0))
    return np.array(out).reshape(-1, 1)


def test_teacher_student_sigmoid_loss(rng):
    p = rng.uniform(0, 1, (100, 1))
    x = np.log(p / (1 - p))
    label = rng.uniform(0, 2, (100, 1))
    check_op("teacher_student_sigmoid_loss", {"X": x, "Label": label},
             reference=ref_teacher_student, rtol=1e-9)
    every = np.array([[-2.0], [-1.0], [-0.5], [0.0], [0.3], [1.0], [1.7]])
    xs = rng.standard_normal((7, 1))
    check_op("teacher_student_sigmoid_loss", {"X": xs, "Label": every},
             reference=ref_teacher_student, rtol=1e-9)
    check_grad("teacher_student_sigmoid_loss", {"X": xs, "Label": every})


def test_teacher_student_gradient_stops_past_the_bounds():
    x = np.array([[20.0], [-20.0], [1.0]])
    lab = np.array([[0.5], [0.5], [0.5]])
    op, env = build_op("teacher_student_sigmoid_loss", {"X": x, "Label": lab})
    run_ops([op], env)
    grads = analytic_grads(op, env, {"out_Y_0": np.ones((3, 1))}, ["X"])
    assert grads["X"][0][:2].tolist() == [[0.0], [0.0]] and grads["X"][0][2, 0] != 0


# --- label_smooth -------------------------------------------------------------------------------

@pytest.mark.parametrize("prior,shape", [(False, (10, 12)), (True, (10, 12)),
                                         (False, (2, 5, 12)), (True, (2, 5, 12))])
def test_label_smooth(rng, prior, shape):
    label = np.zeros((10, 12))
    label[np.arange(10), rng.integers(0, 12, 10)] = 1
    label = label.reshape(shape)
    ins = {"X": label}
    if prior:
        ins["PriorDist"] = rng.random((1, 12))
    check_op("label_smooth", ins, {"epsilon": 0.1},
             reference=lambda X, epsilon, PriorDist=None: (
                 (1 - epsilon) * X + epsilon * (PriorDist if PriorDist is not None
                                                else 1.0 / X.shape[-1])))
    check_grad("label_smooth", ins, {"epsilon": 0.1})


def test_label_smooth_checks_the_prior(rng):
    with pytest.raises(ShapeError, match="one probability per class"):
        check_op("label_smooth", {"X": np.ones((2, 4)), "PriorDist": np.ones((1, 3))})
    with pytest.raises(ShapeError, match=r"epsilon must lie in \[0, 1\]"):
        check_op("label_smooth", {"X": np.ones((2, 4))}, {"epsilon": 1.5})


# --- rank_loss ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((100, 1), (100, 1), (100, 1)), ((100,), (100, 1), (100, 1)),
                                    ((100, 1), (100,), (100, 1)), ((100, 1), (100, 1), (100,)),
                                    ((100,), (100,), (100, 1)), ((100,), (100,), (100,))])
def test_rank_loss(rng, shapes):
    label = rng.integers(0, 2, (100, 1)).astype("float32")
    left, right = rng.random((100, 1)).astype("float32"), rng.random((100, 1)).astype("float32")
    ins = {"Label": label.reshape(shapes[0]), "Left": left.reshape(shapes[1]),
           "Right": right.reshape(shapes[2])}
    check_op("rank_loss", ins, reference=lambda Label, Left, Right: (
        np.log(1.0 + np.exp(left - right)) - label * (left - right)).reshape(shapes[0]))
    small = {k: v[:12] for k, v in ins.items()}
    check_grad("rank_loss", small, wrt=["Left", "Right"])


def test_rank_loss_is_stable_for_large_differences():
    got = run_forward("rank_loss", {"Label": np.array([[1.0]]), "Left": np.array([[800.0]]),
                                    "Right": np.array([[0.0]])})["Out"][0]
    assert got[0, 0] == 0.0


def test_rank_loss_rejects_wide_inputs():
    with pytest.raises(ShapeError, match=r"\[N\] or \[N, 1\]"):
        check_op("rank_loss", {"Label": np.ones((3, 2)), "Left": np.ones((3, 1)),
                               "Right": np.ones((3, 1))})


# --- margin_rank_loss ---------------------------------------------------------------------------

def test_margin_rank_loss(rng):
    label = 2 * rng.integers(0, 2, (5, 1)).astype("float32") - 1
    x1, x2 = rng.random((5, 1)).astype("float32"), rng.random((5, 1)).astype("float32")

    def ref(Label, X1, X2, margin):
        loss = np.maximum(-Label * (X1 - X2) + margin, 0)
        return {"Out": loss, "Activated": (loss > 0).astype("float32")}
    check_op("margin_rank_loss", {"Label": label, "X1": x1, "X2": x2}, {"margin": 0.5},
             reference=ref)
    check_grad("margin_rank_loss", {"Label": label, "X1": x1, "X2": x2}, {"margin": 0.5},
               wrt=["X1", "X2"], through=["Out"])


def test_margin_rank_loss_matches_torch(rng):
    label = np.array([[1.0], [-1.0], [1.0], [-1.0]])
    x1, x2 = rng.standard_normal((4, 1)), rng.standard_normal((4, 1))
    out, grads, cot = grads_of("margin_rank_loss", {"Label": label, "X1": x1, "X2": x2},
                               {"margin": 0.3}, ["X1", "X2"], "Out")
    want, (g1, g2) = torch_grads(lambda a, b: F.margin_ranking_loss(
        a, b, t64(label, False), margin=0.3, reduction="none"), [x1, x2], cot)
    close(out, want)
    close(grads["X1"], g1)
    close(grads["X2"], g2)


# --- bpr_loss -----------------------------------------------------------------------------------

def ref_bpr(X, Label, **a):
    out = []
    for row, lab in zip(X, Label[:, 0]):
        s = sum(-np.log(1.0 + np.exp(row[j] - row[lab])) for j in range(len(row)) if j != lab)
        out.append([-s / (len(row) - 1)])
    return np.array(out)


def test_bpr_loss(rng):
    x = rng.random((40, 5))
    x /= x.sum(1, keepdims=True)
    label = rng.integers(0, 5, (40, 1))
    check_op("bpr_loss", {"X": x, "Label": label}, reference=ref_bpr, rtol=1e-9)
    check_grad("bpr_loss", {"X": x[:6] * 4, "Label": label[:6]})
    three = rng.standard_normal((2, 3, 4))
    lab3 = rng.integers(0, 4, (2, 3, 1))
    got = check_op("bpr_loss", {"X": three, "Label": lab3})["Y"][0]
    close(got.reshape(6, 1), ref_bpr(three.reshape(6, 4), lab3.reshape(6, 1)))
    check_grad("bpr_loss", {"X": three, "Label": lab3})


def test_bpr_loss_label_out_of_range():
    with pytest.raises(ValueError, match="label 5 is out of range"):
        run_forward("bpr_loss", {"X": np.ones((2, 5)), "Label": np.array([[1], [5]])})


# --- warpctc ------------------------------------------------------------------------------------

def log_softmax(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def ctc_reference(logp, label, blank):
    """Paddle's per-sequence recursion (Graves, ch. 7.3) in log space: -log p(label), 0
    when the label cannot fit its frames."""
    t_len, s_len = len(logp), 2 * len(label) + 1
    repeats = sum(1 for a, b in zip(label[:-1], label[1:]) if a == b)
    if t_len < len(label) + repeats:
        return 0.0
    ext = [blank if s % 2 == 0 else label[s // 2] for s in range(s_len)]
    alpha = np.full((t_len, s_len), -np.inf)
    alpha[0, 0] = logp[0, blank]
    if s_len > 1:
        alpha[0, 1] = logp[0, ext[1]]
    for t in range(1, t_len):
        for s in range(s_len):
            terms = [alpha[t - 1, s]] + ([alpha[t - 1, s - 1]] if s > 0 else [])
            if s > 1 and ext[s] != blank and ext[s] != ext[s - 2]:
                terms.append(alpha[t - 1, s - 2])
            alpha[t, s] = np.logaddexp.reduce(terms) + logp[t, ext[s]]
    ends = alpha[-1, -2:] if s_len > 1 else alpha[-1, -1:]
    return -np.logaddexp.reduce(ends)


def ctc_brute_force(logp, label, blank):
    """-log of the summed probability of every frame-level path collapsing to label (0
    when none does, as warp-ctc gives)."""
    t_len, c = logp.shape
    total = -np.inf
    for path in itertools.product(range(c), repeat=t_len):
        collapsed = [k for i, k in enumerate(path) if k != blank and (i == 0 or
                                                                       path[i - 1] != k)]
        if collapsed == list(label):
            total = np.logaddexp(total, sum(logp[t, k] for t, k in enumerate(path)))
    return -total if np.isfinite(total) else 0.0


def ctc_batch(rng, logits_len, label_len, classes, blank, pad=0.0):
    b, t, lm = len(logits_len), max(logits_len), max(max(label_len), 1)
    logits = rng.uniform(0.1, 1.0, (b, t, classes))
    labels = rng.integers(0, classes - 1, (b, lm))
    labels = np.where(labels >= blank, labels + 1, labels)       # labels are never blank
    for i, (n, m) in enumerate(zip(logits_len, label_len)):
        logits[i, n:] = pad
        labels[i, m:] = 999
    return logits, labels


@pytest.mark.parametrize("classes,blank", [(12, 11), (8, 7), (514, 0)])
def test_warpctc_matches_paddles_reference(rng, classes, blank):
    logits_len, label_len = np.array([4, 1, 3, 3]), np.array([3, 1, 4, 4])  # Paddle's
    logits, labels = ctc_batch(rng, logits_len, label_len, classes, blank, pad=3.0)

    def ref(Logits, Label, LogitsLength, LabelLength, blank, **a):
        return {"Loss": np.array([[ctc_reference(log_softmax(Logits[i, :n]),
                                                 list(Label[i, :m]), blank)]
                                  for i, (n, m) in enumerate(zip(LogitsLength, LabelLength))])}
    got = check_op("warpctc", {"Logits": logits.astype("float32"),
                               "Label": labels.astype("int32"),
                               "LogitsLength": logits_len, "LabelLength": label_len},
                   {"blank": blank}, reference=ref, rtol=1e-5)
    assert got["Loss"][0][3, 0] == 0.0            # 4 labels cannot fit 3 frames


def test_warpctc_matches_brute_force(rng):
    logits_len, label_len = np.array([4, 3, 4, 2, 0]), np.array([2, 1, 0, 2, 0])
    logits, labels = ctc_batch(rng, logits_len, label_len, 3, 0, pad=1e30)
    labels[0, :2] = [1, 1]                        # a repeat needs a blank between
    logits = logits * 3
    got = run_forward("warpctc", {"Logits": logits, "Label": labels,
                                  "LogitsLength": logits_len,
                                  "LabelLength": label_len})["Loss"][0]
    for i, (n, m) in enumerate(zip(logits_len, label_len)):
        want = ctc_brute_force(log_softmax(logits[i, :n]), list(labels[i, :m]), 0) if n \
            else 0.0
        np.testing.assert_allclose(got[i, 0], want, rtol=1e-10)


def test_warpctc_without_lengths(rng):
    logits = rng.standard_normal((2, 5, 4))
    labels = np.array([[1, 2], [3, 3]])
    got = run_forward("warpctc", {"Logits": logits, "Label": labels})["Loss"][0]
    for i in range(2):
        np.testing.assert_allclose(got[i, 0], ctc_reference(log_softmax(logits[i]),
                                                            list(labels[i]), 0), rtol=1e-10)


def test_warpctc_gradient_with_lengths_and_padding(rng):
    logits_len, label_len = np.array([5, 3, 4, 2]), np.array([2, 1, 3, 2])
    logits, labels = ctc_batch(rng, logits_len, label_len, 4, 0, pad=4.0)
    labels[2, :3] = [2, 2, 1]
    ins = {"Logits": logits, "Label": labels, "LogitsLength": logits_len,
           "LabelLength": label_len}
    check_grad("warpctc", ins, wrt=["Logits"], through=["Loss"], max_elements=80)
    # row 3: 2 distinct labels in 2 frames just fit; make it infeasible: no gradient
    labels[3, :2] = [1, 1]
    _, grads, _ = grads_of("warpctc", dict(ins, Label=labels), {}, ["Logits"], "Loss")
    assert (grads["Logits"][3] == 0).all() and (grads["Logits"][0] != 0).any()


def test_warpctc_norm_by_times_scales_the_gradient_only(rng):
    logits_len, label_len = np.array([5, 3]), np.array([2, 1])
    logits, labels = ctc_batch(rng, logits_len, label_len, 5, 0)
    ins = {"Logits": logits, "Label": labels, "LogitsLength": logits_len,
           "LabelLength": label_len}
    loss, plain, _ = grads_of("warpctc", ins, {}, ["Logits"], "Loss")
    loss_n, normed, _ = grads_of("warpctc", ins, {"norm_by_times": True}, ["Logits"], "Loss")
    np.testing.assert_array_equal(loss, loss_n)
    np.testing.assert_allclose(normed["Logits"], plain["Logits"] / logits_len[:, None, None],
                               rtol=1e-12)


def test_warpctc_matches_torch_ctc_loss(rng):
    logits_len, label_len = np.array([6, 4, 5]), np.array([3, 2, 1])
    logits, labels = ctc_batch(rng, logits_len, label_len, 6, 2)
    ins = {"Logits": logits, "Label": labels, "LogitsLength": logits_len,
           "LabelLength": label_len}
    out, grads, cot = grads_of("warpctc", ins, {"blank": 2}, ["Logits"], "Loss")
    x = t64(logits)
    lp = torch.log_softmax(x, dim=2).transpose(0, 1)
    want = F.ctc_loss(lp, torch.tensor(labels), torch.tensor(logits_len),
                      torch.tensor(label_len), blank=2, reduction="none")
    (want * torch.tensor(cot[:, 0])).sum().backward()
    close(out[:, 0], want.detach().numpy())
    close(grads["Logits"], x.grad.numpy(), atol=1e-9)


def test_warpctc_is_stable_on_long_inputs(rng):
    """1000 frames of confident float32 scores: finite, equal to a float64 recursion."""
    logits = (rng.standard_normal((1, 1000, 6)) * 20).astype("float32")
    labels = rng.integers(1, 6, (1, 40))
    got = run_forward("warpctc", {"Logits": logits, "Label": labels})["Loss"][0]
    x = torch.tensor(logits.astype(np.float64))
    want = F.ctc_loss(torch.log_softmax(x, 2).transpose(0, 1), torch.tensor(labels),
                      torch.tensor([1000]), torch.tensor([40]), reduction="none")
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[0, 0], want.item(), rtol=1e-4)


def test_warpctc_errors():
    x, lab = np.zeros((2, 3, 4)), np.zeros((2, 2), "int64")
    with pytest.raises(ShapeError, match="give both LogitsLength and LabelLength"):
        check_op("warpctc", {"Logits": x, "Label": lab, "LogitsLength": np.array([3, 3])})
    with pytest.raises(ShapeError, match=r"blank=4 must be a class of Logits"):
        check_op("warpctc", {"Logits": x, "Label": lab}, {"blank": 4})
    with pytest.raises(ShapeError, match=r"padded batch \[B, T, C\]"):
        check_op("warpctc", {"Logits": x[0], "Label": lab})
    with pytest.raises(ValueError, match="label 7 is out of range"):
        run_forward("warpctc", {"Logits": x, "Label": lab + 7})


# --- ctc_align ----------------------------------------------------------------------------------

def ref_align(Input, InputLength, blank, merge_repeated, padding_value, **a):
    out = np.full(Input.shape, padding_value)
    lengths = []
    for i, row in enumerate(Input):
        kept, prev = [], -1
        for tok in row[:InputLength[i]]:
            if tok != blank and not (merge_repeated and tok == prev):
                kept.append(tok)
            prev = tok
        out[i, :len(kept)] = kept
        lengths.append([len(kept)])
    return {"Output": out, "OutputLength": np.array(lengths)}


@pytest.mark.parametrize("merge,blank,pad", [(False, 0, 0), (True, 0, 0), (True, 7, -1)])
def test_ctc_align(merge, blank, pad):
    ids = np.array([[0, 1, 2, 2, 0, 4, 0, 4, 5, 0, 6], [6, 0, 0, 7, 7, 7, 0, 9, 9, 9, 9]])
    lengths = np.array([11, 7])
    check_op("ctc_align", {"Input": ids, "InputLength": lengths},
             {"merge_repeated": merge, "blank": blank, "padding_value": pad},
             reference=ref_align, output_counts={"OutputLength": 1})


def test_ctc_align_without_lengths():
    ids = np.array([[1, 1, 0, 1, 2, 0, 0]])
    got = run_forward("ctc_align", {"Input": ids})["Output"][0]
    assert got.tolist() == [[1, 1, 2, 0, 0, 0, 0]]


# --- edit_distance ------------------------------------------------------------------------------

def levenshtein(hyp, ref):
    d = np.zeros((len(hyp) + 1, len(ref) + 1))
    d[:, 0], d[0, :] = np.arange(len(hyp) + 1), np.arange(len(ref) + 1)
    for i in range(1, len(hyp) + 1):
        for j in range(1, len(ref) + 1):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1,
                          d[i - 1, j - 1] + (hyp[i - 1] != ref[j - 1]))
    return d[-1, -1]


def ref_edit(Hyps, Refs, HypsLength, RefsLength, normalized, ignored_tokens, **a):
    out = []
    for h, r, m, n in zip(Hyps, Refs, HypsLength, RefsLength):
        h = [v for v in h[:m] if v not in ignored_tokens]
        r = [v for v in r[:n] if v not in ignored_tokens]
        d = levenshtein(h, r)
        out.append([d / len(r) if normalized else d])
    return {"Out": np.array(out), "SequenceNum": np.array(len(Hyps))}


def test_edit_distance_paddles_cases():
    """Paddle's tests: one pair, then two pairs padded, normalized or not."""
    h, r = np.array([[12, 3, 5, 8, 2]]), np.array([[12, 4, 7, 8]])
    check_op("edit_distance", {"Hyps": h, "Refs": r}, reference=lambda **a: np.array([[3.0]]),
             batch_unknown=False)
    hyps = np.array([[1, 2, 1, 3, 2], [1, 9, 9, 9, 9]])
    refs = np.array([[1, 3, 7, 2, 0], [2, 5, 8, 0, 0]])
    ins = {"Hyps": hyps, "Refs": refs, "HypsLength": np.array([5, 1]),
           "RefsLength": np.array([4, 3])}
    for normalized in (False, True):
        check_op("edit_distance", ins, {"normalized": normalized}, reference=ref_edit)


@pytest.mark.parametrize("ignored", [[], [0, 3]])
def test_edit_distance_random_rows(rng, ignored):
    b = 9
    hyps, refs = rng.integers(0, 5, (b, 7)), rng.integers(0, 5, (b, 6))
    m, n = rng.integers(0, 8, b), rng.integers(1, 7, b)
    m[0], n[1] = 0, 6
    ins = {"Hyps": hyps, "Refs": refs, "HypsLength": m, "RefsLength": n}
    attrs = {"normalized": False, "ignored_tokens": ignored}
    check_op("edit_distance", ins, attrs, reference=ref_edit)


def test_edit_distance_empty_reference_cannot_be_normalized():
    with pytest.raises(ValueError, match="a reference is empty"):
        run_forward("edit_distance", {"Hyps": np.ones((1, 2), "int64"),
                                      "Refs": np.ones((1, 2), "int64"),
                                      "HypsLength": np.array([2]), "RefsLength": np.array([0])},
                    {"normalized": True})


# --- nce ----------------------------------------------------------------------------------------

def ref_nce(Input, Weight, Bias, SampleWeight, Label, num_total_classes, custom_neg_classes,
            **a):
    """Paddle's reference: the negatives are custom_neg_classes, q = S / C (uniform)."""
    n, nt = Label.shape
    negs = list(custom_neg_classes)
    labels = np.array([list(row) + negs for row in Label])
    o = 1 / (1 + np.exp(-(np.einsum("nd,nsd->ns", Input, Weight[labels])
                         + Bias.reshape(-1)[labels])))
    q = len(negs) / num_total_classes
    cost = np.where(np.arange(labels.shape[1]) < nt, -np.log(o / (o + q)),
                    -np.log(q / (o + q)))
    w = 1 if SampleWeight is None else SampleWeight.reshape(n, 1)
    return {"Cost": (cost * w).sum(1, keepdims=True), "SampleLogits": o,
            "SampleLabels": labels}


@pytest.mark.parametrize("dim,batch,classes,true,neg", [(5, 25, 100, 1, 2), (10, 20, 100, 2, 5)])
def test_nce_matches_paddles_reference(rng, dim, batch, classes, true, neg):
    ins = {"Input": rng.standard_normal((batch, dim)),
           "Label": rng.integers(0, classes, (batch, true)),
           "Weight": rng.standard_normal((classes, dim)), "Bias": rng.standard_normal(classes),
           "SampleWeight": rng.standard_normal(batch)}
    attrs = {"num_total_classes": classes, "num_neg_samples": neg,
             "custom_neg_classes": list(range(neg)), "sampler": 0}
    check_op("nce", ins, attrs, reference=lambda **a: ref_nce(**a), rtol=1e-9)
    small = {k: (v[:4] if k in ("Input", "Label", "SampleWeight") else v) for k, v in ins.items()}
    check_grad("nce", small, attrs, wrt=["Input", "Weight", "Bias"], through=["Cost"])


@pytest.mark.parametrize("sampler", [0, 1, 2])
def test_nce_samplers(sampler):
    c, n = 6, 4000
    dist = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05], "float32")
    ins = {"Input": np.zeros((n, 2)), "Label": np.zeros((n, 1), "int64"),
           "Weight": np.zeros((c, 2))}
    if sampler == 2:
        ins["CustomDistProbs"] = dist
    attrs = {"num_total_classes": c, "num_neg_samples": 3, "sampler": sampler}
    got = run_forward("nce", ins, attrs, rng=np.random.default_rng(0))
    drawn = got["SampleLabels"][0][:, 1:]
    freq = np.bincount(drawn.reshape(-1), minlength=c) / drawn.size
    want = {0: np.full(c, 1 / c),
            1: np.r_[np.log((np.arange(c - 1) + 2) / (np.arange(c - 1) + 1)) / np.log(c - 1 + 1),
                     0],
            2: dist}[sampler]
    np.testing.assert_allclose(freq, want, atol=0.02)
    # every logit is 0, so o = 1/2 and each row's cost follows from q alone
    q = 3 * (want[got["SampleLabels"][0]] if sampler else np.full((n, 4), 1 / c))
    o = 0.5
    cost = np.where(np.arange(4) < 1, -np.log(o / (o + q)), -np.log(q / (o + q))).sum(1)
    np.testing.assert_allclose(got["Cost"][0][:, 0], cost, rtol=1e-6)


def test_nce_seed_repeats_its_draws():
    ins = {"Input": np.ones((5, 2)), "Label": np.zeros((5, 1), "int64"),
           "Weight": np.ones((50, 2))}
    attrs = {"num_total_classes": 50, "num_neg_samples": 4, "seed": 7}
    a = run_forward("nce", ins, attrs)["SampleLabels"][0]
    b = run_forward("nce", ins, attrs)["SampleLabels"][0]
    np.testing.assert_array_equal(a, b)


# --- hierarchical_sigmoid -----------------------------------------------------------------------

def ref_hsigmoid(X, W, Label, num_classes, Bias=None, PathTable=None, PathCode=None, **a):
    """Paddle's reference, default tree or custom paths."""
    n = len(X)
    if PathTable is None:
        length = int(num_classes - 1).bit_length()
        paths = []
        for lab in Label.reshape(-1):
            c = int(lab) + num_classes
            steps = c.bit_length() - 1
            paths.append([((c >> (j + 1)) - 1, (c >> j) & 1) for j in range(steps)])
    else:
        length = PathTable.shape[1]
        paths = [[(t, b) for t, b in zip(tab, code)][:int(np.argmax(np.r_[tab, -1] < 0))]
                 for tab, code in zip(PathTable, PathCode)]
    pre = np.zeros((n, length))
    for i, path in enumerate(paths):
        for j, (node, _) in enumerate(path):
            pre[i, j] = W[node] @ X[i] + (Bias[node, 0] if Bias is not None else 0)
    pre = np.clip(pre, -40, 40)
    out = -np.array([[sum(pre[i, j] for j, (_, bit) in enumerate(p) if bit)]
                     for i, p in enumerate(paths)])
    pre = np.log1p(np.exp(pre))
    return {"PreOut": pre, "Out": out + pre.sum(1, keepdims=True)}


@pytest.mark.parametrize("bias", [True, False])
def test_hsigmoid_default_tree(rng, bias):
    classes, feat, batch = 101, 5, 20            # Paddle's test
    ins = {"X": rng.uniform(-1, 1, (batch, feat)), "W": rng.uniform(-1, 1, (classes - 1, feat)),
           "Label": rng.integers(0, classes, (batch, 1))}
    if bias:
        ins["Bias"] = rng.uniform(-1, 1, (classes - 1, 1))
    attrs = {"num_classes": classes}
    check_op("hierarchical_sigmoid", ins, attrs, reference=ref_hsigmoid, rtol=1e-9)
    small = dict(ins, X=ins["X"][:6], Label=ins["Label"][:6])
    check_grad("hierarchical_sigmoid", small, attrs, wrt=["X", "W"] + (["Bias"] if bias else []),
               through=["Out"], max_elements=60)


def test_hsigmoid_custom_tree(rng):
    """Paddle's sparse test: 6 classes, paths of 2 or 3 nodes ended by -1."""
    table = np.array([(0, 2, -1, -1, -1), (0, 1, 3, -1, -1), (0, 1, 4, -1, -1),
                      (0, 2, -1, -1, -1)])
    code = np.array([(0, 0, -1, -1, -1), (1, 1, 1, -1, -1), (1, 0, 0, -1, -1),
                     (0, 1, -1, -1, -1)])
    ins = {"X": rng.random((4, 8)), "W": rng.random((5, 8)), "Label": np.array([0, 1, 4, 5]),
           "PathTable": table, "PathCode": code, "Bias": rng.random((5, 1))}
    attrs = {"num_classes": 6, "is_sparse": True}
    check_op("hierarchical_sigmoid", ins, attrs, reference=ref_hsigmoid, rtol=1e-9)
    check_grad("hierarchical_sigmoid", ins, attrs, wrt=["X", "W", "Bias"], through=["Out"])


def test_hsigmoid_is_a_distribution_over_the_classes(rng):
    """exp(-Out) summed over every class is 1 for the default tree once the log 2 of the
    steps past a short path is taken back."""
    classes = 7
    x, w = rng.standard_normal((1, 3)), rng.standard_normal((classes - 1, 3))
    labels = np.arange(classes).reshape(-1, 1)
    got = run_forward("hierarchical_sigmoid", {"X": np.repeat(x, classes, 0), "W": w,
                                               "Label": labels}, {"num_classes": classes})
    length = int(classes - 1).bit_length()
    steps = np.array([int(c + classes).bit_length() - 1 for c in range(classes)])
    log_p = -got["Out"][0][:, 0] + (length - steps) * np.log(2)
    np.testing.assert_allclose(np.exp(log_p).sum(), 1.0, rtol=1e-12)


# --- sample_logits ------------------------------------------------------------------------------

def test_sample_logits(rng):
    """Paddle's test: 2 rows, K = 20, NT = 10 true classes, S = 5 samples."""
    k, nt, s = 20, 10, 5
    labels = np.tile(np.arange(nt), (2, 1))
    logits = rng.random((2, k))
    got = run_forward("sample_logits", {"Logits": logits, "Labels": labels},
                      {"num_samples": s}, rng=np.random.default_rng(3))
    samples, probs = got["Samples"][0], got["Probabilities"][0]
    assert samples.shape == probs.shape == (2, nt + s)
    assert (got["SampledLabels"][0] == np.arange(nt)).all()
    assert (samples[:, :nt] == labels).all() and (samples[0] == samples[1]).all()
    assert len(set(samples[0, nt:])) == s                     # distinct samples
    want = logits[:, samples[0]] - np.log(probs)
    accidental = np.isin(samples[:, nt:], labels[0])
    want[:, nt:] -= 1e20 * accidental
    np.testing.assert_allclose(got["SampledLogits"][0], np.clip(want, -1e20, 1e20), rtol=1e-12)


def test_sample_logits_probabilities_and_gradient(rng):
    k, s = 50, 8
    labels = rng.integers(0, k, (3, 1))
    logits = rng.standard_normal((3, k))
    from fluid_interactive.ops.sampled_loss import unique_log_uniform
    drawn, tries = unique_log_uniform(np.random.default_rng(5), s, k)
    got = run_forward("sample_logits", {"Logits": logits, "Labels": labels},
                      {"num_samples": s, "remove_accidental_hits": False},
                      rng=np.random.default_rng(5))
    assert (got["Samples"][0][0, 1:] == drawn).all()
    p = np.log((drawn + 2.0) / (drawn + 1.0)) / np.log(k + 1)
    q = p * s if tries == s else -np.expm1(tries * np.log1p(-p))
    np.testing.assert_allclose(got["Probabilities"][0][0, 1:], q, rtol=1e-12)
    custom = {"Logits": logits, "Labels": labels,
              "CustomizedSamples": np.concatenate([labels, np.tile(np.arange(s), (3, 1))], 1),
              "CustomizedProbabilities": rng.uniform(0.1, 1, (3, s + 1))}
    attrs = {"num_samples": s, "use_customized_samples": True}
    check_grad("sample_logits", custom, attrs, wrt=["Logits"], through=["SampledLogits"])
    out = run_forward("sample_logits", custom, attrs)["SampledLogits"][0]
    want = np.take_along_axis(logits, custom["CustomizedSamples"], 1) - np.log(
        custom["CustomizedProbabilities"])
    want[:, 1:] -= 1e20 * (custom["CustomizedSamples"][:, 1:] == labels)
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_sampled_ops_errors():
    with pytest.raises(ShapeError, match=r"num_samples must lie in \[1, K\]"):
        check_op("sample_logits", {"Logits": np.ones((2, 4)), "Labels": np.zeros((2, 1), "int64")},
                 {"num_samples": 5})
    with pytest.raises(ShapeError, match="custom_dist sampler needs CustomDistProbs"):
        check_op("nce", {"Input": np.ones((2, 3)), "Label": np.zeros((2, 1), "int64"),
                         "Weight": np.ones((4, 3))}, {"num_total_classes": 4, "sampler": 2})
    with pytest.raises(ShapeError, match=r"W must be \[5, D\]"):
        check_op("hierarchical_sigmoid", {"X": np.ones((2, 3)), "W": np.ones((4, 3)),
                                          "Label": np.zeros((2, 1), "int64")},
                 {"num_classes": 6})


# --- center_loss --------------------------------------------------------------------------------

@pytest.mark.parametrize("need_update", [True, False])
def test_center_loss_matches_paddles_reference(rng, need_update):
    batch, feat, clusters = 12, 10, 8                   # Paddle's test
    labels = rng.integers(0, clusters, batch)
    x, centers = rng.random((batch, feat)), rng.random((clusters, feat))
    diff = x - centers[labels]
    moved = centers.copy()
    if need_update:
        for k in range(clusters):
            rows = labels == k
            moved[k] += 0.1 * diff[rows].sum(0) / (1 + rows.sum())
    ins = {"X": x, "Label": labels, "Centers": centers, "CenterUpdateRate": np.array([0.1])}
    attrs = {"cluster_num": clusters, "need_update": need_update}
    check_op("center_loss", ins, attrs,
             reference=lambda **a: {"SampleCenterDiff": diff, "CentersOut": moved,
                                    "Loss": 0.5 * (diff ** 2).sum(1, keepdims=True)})
    check_grad("center_loss", ins, attrs, wrt=["X"], through=["Loss"])


# --- more against PyTorch -----------------------------------------------------------------------

def test_rank_loss_matches_torch_bce_with_logits(rng):
    label = rng.integers(0, 2, (6, 1)).astype(np.float64)
    left, right = rng.standard_normal((6, 1)) * 3, rng.standard_normal((6, 1))
    out, grads, cot = grads_of("rank_loss", {"Label": label, "Left": left, "Right": right}, {},
                               ["Left", "Right"], "Out")
    want, (gl, gr) = torch_grads(lambda a, b: F.binary_cross_entropy_with_logits(
        a - b, t64(label, False), reduction="none"), [left, right], cot)
    close(out, want)
    close(grads["Left"], gl)
    close(grads["Right"], gr)


def test_cross_entropy_matches_torch_nll_loss(rng):
    p = rng.dirichlet(np.ones(5), 7)
    label = rng.integers(0, 5, (7, 1))
    label[2, 0] = -100                                  # ignore_index, as torch's default
    out, grads, cot = grads_of("cross_entropy", {"X": p, "Label": label}, {}, ["X"], "Y")
    want, (gp,) = torch_grads(lambda a: F.nll_loss(torch.log(a), torch.tensor(label[:, 0]),
                                                   reduction="none")[:, None], [p], cot)
    close(out, want)
    close(grads["X"], gp)
