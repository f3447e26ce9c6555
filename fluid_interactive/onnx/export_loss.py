"""Export rules of the losses that ONNX's elementwise and reduction nodes express:
huber_loss, smooth_l1_loss, kldiv_loss, log_loss, rank_loss, margin_rank_loss,
teacher_student_sigmoid_loss, label_smooth, sigmoid_cross_entropy_with_logits, and the
losses that pick by label with GatherElements: softmax_with_cross_entropy and
cross_entropy (hard and soft labels) and bpr_loss. Every node they write (Abs, Add, Sub,
Mul, Div, Neg, Min, Max, Relu, Exp, Log, Less, Greater, LessOrEqual, Equal, And, Not,
Where, Cast, Reshape, Flatten, Softmax, LogSoftmax, GatherElements, ReduceSum,
ReduceMean) imports back.

Not here, and why: the CRF, CTC, edit distance, chunk_eval and the greedy decoder (dynamic
programs over a sequence: a Loop would spell them, slowly, and nothing reads them back as
the ops they are); auc and center_loss (they update program state); nce and
sampled_softmax_with_cross_entropy (they draw samples); hsigmoid (its path through the
default class tree has a length per label: a Loop over the code bits, not written).
"""
from __future__ import annotations

import numpy as np

from .export_registry import OpExport, export_rule


def _n(e: OpExport, op: str, *inputs: str, out: str | None = None, **attrs: object) -> str:
    """One node; its single output's name."""
    return e.node(op, list(inputs), None if out is None else [out], **attrs)[0]


def _k(e: OpExport, value: float) -> str:
    """A 0-d constant of the dtype of the op's first input."""
    return e.const(value, e.dtype(e.op.input_names()[0]), "k")


def _softplus(e: OpExport, x: str) -> str:
    """log(1 + exp(x)) = relu(x) + log(1 + exp(-|x|)): never overflows."""
    tail = _n(e, "Exp", _n(e, "Mul", _n(e, "Abs", x), _k(e, -1.0)))
    return _n(e, "Add", _n(e, "Relu", x), _n(e, "Log", _n(e, "Add", tail, _k(e, 1.0))))


def _reduce(e: OpExport, op: str, x: str, axes: list[int] | None, keep: bool,
            out: str | None = None) -> str:
    """ReduceSum / ReduceMean over ``axes`` (None: every axis)."""
    inputs = [x]
    attrs: dict[str, object] = {"keepdims": int(keep)}
    if axes is not None:
        if op == "ReduceSum" or e.opset >= 18:
            inputs.append(e.ints(axes))
        else:
            attrs["axes"] = axes
    return _n(e, op, *inputs, out=out, **attrs)


@export_rule("huber_loss")
def _huber(e: OpExport) -> None:
    """0.5 m^2 + delta (|r| - m) with m = min(|r|, delta): both pieces at once."""
    x = e.input("X")
    r = _n(e, "Sub", e.input("Y"), x, out=e.output("Residual"))
    a = _n(e, "Abs", r)
    m = _n(e, "Min", a, _k(e, float(e.attrs["delta"])))
    quad = _n(e, "Mul", _n(e, "Mul", m, m), _k(e, 0.5))
    lin = _n(e, "Mul", _n(e, "Sub", a, m), _k(e, float(e.attrs["delta"])))
    _n(e, "Add", quad, lin, out=e.output("Out"))


@export_rule("smooth_l1_loss")
def _smooth_l1(e: OpExport) -> None:
    x = e.input("X")
    s2 = float(e.attrs["sigma"]) ** 2
    weighted = e.has_input("InsideWeight")
    d = _n(e, "Sub", x, e.input("Y"), out=None if weighted else e.output("Diff"))
    if weighted:
        d = _n(e, "Mul", d, e.input("InsideWeight"), out=e.output("Diff"))
    a = _n(e, "Abs", d)
    m = _n(e, "Min", a, _k(e, 1.0 / s2))
    err = _n(e, "Add", _n(e, "Sub", a, m), _n(e, "Mul", _n(e, "Mul", m, m), _k(e, 0.5 * s2)))
    if weighted:
        err = _n(e, "Mul", err, e.input("OutsideWeight"))
    flat = _n(e, "Flatten", err, axis=1)
    _reduce(e, "ReduceSum", flat, [1], True, out=e.output("Out"))


@export_rule("kldiv_loss")
def _kldiv(e: OpExport) -> None:
    """relu(t) * (log(max(t, tiny)) - x): 0 where t <= 0 without a Where."""
    x, t = e.input("X"), e.input("Target")
    tiny = float(np.finfo(e.dtype(x)).tiny)
    elem = _n(e, "Mul", _n(e, "Relu", t),
              _n(e, "Sub", _n(e, "Log", _n(e, "Max", t, _k(e, tiny))), x))
    out, reduction = e.output("Loss"), e.attrs["reduction"]
    if reduction == "none":
        _n(e, "Identity", elem, out=out)
    elif reduction == "batchmean":
        rank = len(e.shape(x))
        rows = _reduce(e, "ReduceSum", elem, list(range(1, rank)), False) if rank > 1 else elem
        _reduce(e, "ReduceMean", rows, None, False, out=out)
    else:
        _reduce(e, "ReduceSum" if reduction == "sum" else "ReduceMean", elem, None, False,
                out=out)


@export_rule("log_loss")
def _log_loss(e: OpExport) -> None:
    p, lab = e.input("Predicted"), e.input("Labels")
    eps = float(e.attrs["epsilon"])
    one = _k(e, 1.0)
    pos = _n(e, "Mul", lab, _n(e, "Log", _n(e, "Add", p, _k(e, eps))))
    neg = _n(e, "Mul", _n(e, "Sub", one, lab),
             _n(e, "Log", _n(e, "Add", _n(e, "Sub", one, p), _k(e, eps))))
    _n(e, "Mul", _n(e, "Add", pos, neg), _k(e, -1.0), out=e.output("Loss"))


def _like(e: OpExport, name: str, target: str) -> str:
    """``name`` reshaped to ``target``'s shape when one is [N] and the other [N, 1]."""
    if len(e.shape(name)) == len(e.shape(target)):
        return name
    return _n(e, "Reshape", name, e.ints([-1] + [1] * (len(e.shape(target)) - 1), "shape"))


@export_rule("rank_loss")
def _rank_loss(e: OpExport) -> None:
    lab = e.input("Label")
    d = _n(e, "Sub", _like(e, e.input("Left"), lab), _like(e, e.input("Right"), lab))
    _n(e, "Sub", _softplus(e, d), _n(e, "Mul", lab, d), out=e.output("Out"))


@export_rule("margin_rank_loss")
def _margin_rank_loss(e: OpExport) -> None:
    lab = e.input("Label")
    gap = _n(e, "Mul", lab, _n(e, "Sub", e.input("X2"), e.input("X1")))
    out = _n(e, "Relu", _n(e, "Add", gap, _k(e, float(e.attrs["margin"]))),
             out=e.output("Out"))
    hit = _n(e, "Greater", out, _k(e, 0.0))
    _n(e, "Cast", hit, out=e.output("Activated"), to=e.onnx_dtype(e.dtype(lab)))


@export_rule("teacher_student_sigmoid_loss")
def _teacher_student(e: OpExport) -> None:
    """softplus(x) (1 + z) - x (c2 - c1) - x label z with c1 = [label < -1], c2 = [label <
    0] and z = 1 - c2: the four cases of the label's encoding."""
    x, lab = e.input("X"), e.input("Label")
    to = e.onnx_dtype(e.dtype(x))
    c1 = _n(e, "Cast", _n(e, "Less", lab, _k(e, -1.0)), to=to)
    c2 = _n(e, "Cast", _n(e, "Less", lab, _k(e, 0.0)), to=to)
    z = _n(e, "Sub", _k(e, 1.0), c2)
    total = _n(e, "Mul", _softplus(e, x), _n(e, "Add", z, _k(e, 1.0)))
    total = _n(e, "Sub", total, _n(e, "Mul", x, _n(e, "Sub", c2, c1)))
    _n(e, "Sub", total, _n(e, "Mul", _n(e, "Mul", x, lab), z), out=e.output("Y"))


@export_rule("label_smooth")
def _label_smooth(e: OpExport) -> None:
    x = e.input("X")
    eps = float(e.attrs["epsilon"])
    kept = _n(e, "Mul", x, _k(e, 1.0 - eps))
    if e.has_input("PriorDist"):
        k = e.shape(x)[-1]
        prior = _n(e, "Reshape", e.input("PriorDist"), e.ints([k], "shape"))
        spread = _n(e, "Mul", prior, _k(e, eps))
    else:
        spread = _k(e, eps / e.shape(x)[-1])
    _n(e, "Add", kept, spread, out=e.output("Out"))


@export_rule("sigmoid_cross_entropy_with_logits")
def _sigmoid_ce(e: OpExport) -> None:
    """softplus(x) - x z, 0 where the label's integer part is ignore_index (the label lies
    in (ignore - 1, ignore] for a negative one, [ignore, ignore + 1) otherwise)."""
    x, z = e.input("X"), e.input("Label")
    ignore = float(e.attrs["ignore_index"])
    loss = _n(e, "Sub", _softplus(e, x), _n(e, "Mul", x, z))
    if ignore < 0:
        inside = _n(e, "And", _n(e, "Greater", z, _k(e, ignore - 1.0)),
                    _n(e, "LessOrEqual", z, _k(e, ignore)))
    else:
        inside = _n(e, "And", _n(e, "Less", z, _k(e, ignore + 1.0)),
                    _n(e, "Not", _n(e, "Less", z, _k(e, ignore))))
    keep = _n(e, "Cast", _n(e, "Not", inside), to=e.onnx_dtype(e.dtype(x)))
    if e.attrs["normalize"]:
        count = _n(e, "Max", _reduce(e, "ReduceSum", keep, None, False), _k(e, 1.0))
        keep = _n(e, "Div", keep, count)
    _n(e, "Mul", loss, keep, out=e.output("Out"))


def _picked(e: OpExport, values: str, label: str, axis: int, dtype: str) -> tuple[str, str]:
    """(values at each label along ``axis`` (GatherElements), the 0/1 mask of ``dtype`` of
    the labels that are not ignore_index)."""
    ignore = int(e.attrs["ignore_index"])
    if e.dtype(label) != "int64":
        label = _n(e, "Cast", label, to=e.onnx_dtype("int64"))
    kept = _n(e, "Not", _n(e, "Equal", label, e.const(ignore, "int64", "ignore")))
    safe = _n(e, "Where", kept, label, e.const(0, "int64", "zero"))
    picked = _n(e, "GatherElements", values, safe, axis=axis)
    return picked, _n(e, "Cast", kept, to=e.onnx_dtype(dtype))


@export_rule("softmax_with_cross_entropy")
def _softmax_ce(e: OpExport) -> None:
    """Softmax, and -sum(label * LogSoftmax) along the axis (soft labels) or -LogSoftmax
    at the label (GatherElements; 0 where the label is ignore_index)."""
    x, lab = e.input("Logits"), e.input("Label")
    rank = len(e.shape(x))
    axis = int(e.attrs["axis"]) % rank
    _n(e, "Softmax", x, out=e.output("Softmax"), axis=axis)
    logp = _n(e, "LogSoftmax", x, axis=axis)
    if not e.attrs["soft_label"]:
        picked, kept = _picked(e, logp, lab, axis, e.dtype(x))
        _n(e, "Mul", _n(e, "Neg", picked), kept, out=e.output("Loss"))
        return
    total = _reduce(e, "ReduceSum", _n(e, "Mul", lab, logp), [axis], True)
    _n(e, "Mul", total, _k(e, -1.0), out=e.output("Loss"))


def _clamped_log(e: OpExport, p: str, dtype: str) -> str:
    """log(p) with log(0) = -1e20 (float16: its most negative finite value), as the op
    clamps it."""
    big = float(np.finfo(dtype).max) if dtype == "float16" else 1e20
    positive = _n(e, "Greater", p, _k(e, 0.0))
    log = _n(e, "Log", _n(e, "Where", positive, p, _k(e, 1.0)))
    return _n(e, "Where", positive, log, _k(e, -big))


@export_rule("cross_entropy")
def _cross_entropy(e: OpExport) -> None:
    """-log(X) at the label (hard; 0 where it is ignore_index) or -sum(Label * log X)
    along the last axis (soft); -log(0) is 1e20, as the op clamps it."""
    x, lab = e.input("X"), e.input("Label")
    axis = len(e.shape(x)) - 1
    if e.attrs["soft_label"]:
        logs = _n(e, "Mul", lab, _clamped_log(e, x, e.dtype(x)))
        total = _reduce(e, "ReduceSum", logs, [axis], True)
        _n(e, "Neg", total, out=e.output("Y"))
        return
    picked, kept = _picked(e, x, lab, axis, e.dtype(x))
    _n(e, "Mul", _n(e, "Neg", _clamped_log(e, picked, e.dtype(x))), kept, out=e.output("Y"))


@export_rule("bpr_loss")
def _bpr_loss(e: OpExport) -> None:
    """The mean over the other classes of softplus(X[j] - X[label]): the row's sum less
    the label's own term, over C - 1."""
    x, lab = e.input("X"), e.input("Label")
    classes = e.shape(x)[-1]
    if classes < 0:
        e.fail("takes scores of an unknown number of classes; declare C to export it")
    if e.dtype(lab) != "int64":
        lab = _n(e, "Cast", lab, to=e.onnx_dtype("int64"))
    axis = len(e.shape(x)) - 1
    own = _n(e, "GatherElements", x, lab, axis=axis)
    terms = _softplus(e, _n(e, "Sub", x, own))
    others = _n(e, "Sub", _reduce(e, "ReduceSum", terms, [axis], True),
                _n(e, "GatherElements", terms, lab, axis=axis))
    _n(e, "Div", others, _k(e, float(classes - 1)), out=e.output("Y"))
