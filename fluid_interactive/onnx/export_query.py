"""Export rules of the ops that ask questions of tensors, as the formulas they compute:

``isinf`` / ``isnan``   ``IsInf`` / ``IsNaN``, counted (``ReduceSum``) and compared with 0:
                        whether any element is; [1] of X's dtype (integers: never)
``isfinite``            no element ``IsInf`` or ``IsNaN``: [1] bool
``allclose``            ``|a - b| <= atol + rtol * |b|`` for finite a, b (or equal, or
                        both NaN with ``equal_nan``) at every element: [1] bool
``is_empty``            ``Size`` equal to 0: [1] bool
``shard_index``         ``Where`` X's shard (``Div``) is ``shard_id``: X ``Mod`` the shard
                        size, else ``ignore_value`` (indices are not checked: ONNX cannot
                        raise)
``mean_iou``            per-class counts of ``OneHot`` rows, the IoU averaged over the
                        classes that occur
``accuracy``            the rank of each label's score (``GatherElements``; a tie goes to
                        the lower class, as the op has it) under k, or the label among
                        the given Indices, counted; Accuracy = Correct / Total (0 for no
                        rows), Correct and Total 0-d int64
"""
from __future__ import annotations

import numpy as np

from ..ir.records import INT_DTYPES
from .export_registry import OpExport, export_rule


def _count(e: OpExport, flags: str) -> str:
    """The number of true elements of the bool ``flags`` (0-d int64; 0 when empty)."""
    return e.node("ReduceSum", [e.node("Cast", [flags], to=e.onnx_dtype("int64"))[0]],
                  keepdims=0)[0]


def _as_one(e: OpExport, value: str, out: str) -> None:
    e.node("Reshape", [value, e.ints([1], "one")], [out])


def _none(e: OpExport, flags: str) -> str:
    """Whether no element of the bool ``flags`` is true (0-d bool)."""
    return e.node("Equal", [_count(e, flags), e.const(0, "int64", "zero")])[0]


@export_rule("isinf", "isnan", "isfinite")
def _overflow(e: OpExport) -> None:
    x, out = e.input("X"), e.output("Out")
    kind = e.op.type
    if e.dtype(x) in INT_DTYPES:   # integers are always finite
        answer = e.const(np.full(1, kind == "isfinite"), e.dtype(out), "answer")
        e.node("Identity", [answer], [out])
        return
    if kind == "isfinite":
        bad = e.node("Or", [e.node("IsInf", [x])[0], e.node("IsNaN", [x])[0]])[0]
        _as_one(e, _none(e, bad), out)
        return
    hit = e.node("IsInf" if kind == "isinf" else "IsNaN", [x])[0]
    some = e.node("Not", [_none(e, hit)])[0]
    _as_one(e, e.node("Cast", [some], to=e.onnx_dtype(e.dtype(out)))[0], out)


@export_rule("allclose")
def _allclose(e: OpExport) -> None:
    """NumPy's isclose at every element: equal (infinities of one sign), or both finite
    and within the tolerance, or (with equal_nan) both NaN. The infinities are set to 0
    before the subtraction, so no inf - inf is computed (where a program would warn)."""
    a, b = e.input("Input"), e.input("Other")
    nan_a, nan_b = (e.node("IsNaN", [v])[0] for v in (a, b))
    finite_a, finite_b = (e.node("Not", [e.node("Or", [e.node("IsInf", [v])[0], nan])[0]])[0]
                          for v, nan in ((a, nan_a), (b, nan_b)))
    zero = e.scalar(0.0, a, "zero")
    safe_a, safe_b = (e.node("Where", [ok, v, zero])[0]
                      for v, ok in ((a, finite_a), (b, finite_b)))
    limit = e.node("Add", [e.scalar(float(e.attrs["atol"]), a, "atol"),
                           e.node("Mul", [e.scalar(float(e.attrs["rtol"]), a, "rtol"),
                                          e.node("Abs", [safe_b])[0]])[0]])[0]
    near = e.node("LessOrEqual", [e.node("Abs", [e.node("Sub", [safe_a, safe_b])[0]])[0],
                                  limit])[0]
    near = e.node("And", [near, e.node("And", [finite_a, finite_b])[0]])[0]
    close = e.node("Or", [near, e.node("Equal", [a, b])[0]])[0]
    if e.attrs["equal_nan"]:
        close = e.node("Or", [close, e.node("And", [nan_a, nan_b])[0]])[0]
    _as_one(e, _none(e, e.node("Not", [close])[0]), e.output("Out"))


@export_rule("is_empty")
def _is_empty(e: OpExport) -> None:
    size = e.node("Size", [e.input("X")])[0]
    _as_one(e, e.node("Equal", [size, e.const(0, "int64", "zero")])[0], e.output("Out"))


@export_rule("shard_index")
def _shard_index(e: OpExport) -> None:
    a, x = e.attrs, e.input("X")
    size = (int(a["index_num"]) + int(a["nshards"]) - 1) // int(a["nshards"])
    dtype = e.dtype(x)
    shard = e.node("Div", [x, e.const(size, dtype, "size")])[0]
    mine = e.node("Equal", [shard, e.const(int(a["shard_id"]), dtype, "shard_id")])[0]
    within = e.node("Mod", [x, e.const(size, dtype, "size")])[0]
    e.node("Where", [mine, within, e.const(int(a["ignore_value"]), dtype, "ignore")],
           [e.output("Out")])


@export_rule("accuracy")
def _accuracy(e: OpExport) -> None:
    label = e.input("Label")
    if e.dtype(label) != "int64":
        label = e.node("Cast", [label], to=e.onnx_dtype("int64"))[0]
    if e.has_input("Indices"):
        top = e.input("Indices")
        if e.dtype(top) != "int64":
            top = e.node("Cast", [top], to=e.onnx_dtype("int64"))[0]
        hits = e.node("Equal", [top, label])[0]                        # [N, k]
        right = e.node("Greater", [_count_rows(e, hits), e.const(0, "int64", "zero")])[0]
    else:
        right = _within_top_k(e, e.input("Out"), label)
    correct = _count(e, right)
    total = e.node("Gather", [e.node("Shape", [label])[0], e.const(0, "int64", "rows")],
                   axis=0)[0]
    e.node("Identity", [correct], [e.output("Correct")])
    e.node("Identity", [total], [e.output("Total")])
    rows = e.node("Max", [total, e.const(1, "int64", "one")])[0]
    f32 = e.onnx_dtype("float32")
    e.node("Div", [e.node("Cast", [correct], to=f32)[0], e.node("Cast", [rows], to=f32)[0]],
           [e.output("Accuracy")])


def _count_rows(e: OpExport, flags: str) -> str:
    """The number of true elements of each row of the bool [N, C] ``flags``: [N] int64."""
    return e.node("ReduceSum", [e.node("Cast", [flags], to=e.onnx_dtype("int64"))[0],
                                e.ints([1])], keepdims=0)[0]


def _within_top_k(e: OpExport, scores: str, label: str) -> str:
    """[N] bool: whether fewer than k classes rank ahead of the label (a higher score, or
    the same score at a lower class), for labels in range."""
    classes = e.shape(scores)[1]
    if classes < 0:
        e.fail("takes scores of an unknown number of classes; declare C to export it")
    valid = e.node("And", [e.node("GreaterOrEqual", [label, e.const(0, "int64", "zero")])[0],
                           e.node("Less", [label, e.const(classes, "int64", "classes")])[0]])[0]
    safe = e.node("Where", [valid, label, e.const(0, "int64", "zero")])[0]
    own = e.node("GatherElements", [scores, safe], axis=1)[0]           # [N, 1]
    cols = e.const(list(range(classes)), "int64", "cols")
    ahead = e.node("Or", [e.node("Greater", [scores, own])[0],
                          e.node("And", [e.node("Equal", [scores, own])[0],
                                         e.node("Less", [cols, safe])[0]])[0]])[0]
    within = e.node("Less", [_count_rows(e, ahead), e.const(int(e.attrs["k"]), "int64", "k")])[0]
    flat = e.node("Reshape", [valid, e.ints([-1], "rows")])[0]
    return e.node("And", [within, flat])[0]


@export_rule("mean_iou")
def _mean_iou(e: OpExport) -> None:
    """Per class, counted over ``OneHot`` rows of the predictions and labels: correct =
    both hot, wrong = either hot less twice the correct; then the counts carried in are
    added, and the IoU averaged over the classes that occur (plus the means carried in).
    Ids outside [0, num_classes) count for no class (the op raises for them)."""
    n = int(e.attrs["num_classes"])
    f32, i32 = e.onnx_dtype("float32"), e.onnx_dtype("int32")
    hot = []
    for slot in ("Predictions", "Labels"):
        ids = e.node("Reshape", [e.input(slot), e.ints([-1], "flat")])[0]
        hot.append(e.node("OneHot", [ids, e.const(n, "int64", "depth"),
                                     e.const([0, 1], "float32", "values")], axis=-1)[0])
    each = [e.node("ReduceSum", [h, e.ints([0])], keepdims=0)[0] for h in hot]
    correct = e.node("ReduceSum", [e.node("Mul", hot)[0], e.ints([0])], keepdims=0)[0]
    wrong = e.node("Sub", [e.node("Add", each)[0],
                           e.node("Mul", [correct, e.const(2.0, "float32", "two")])[0]])[0]
    correct, wrong = (e.node("Cast", [v], to=i32)[0] for v in (correct, wrong))
    for slot, value in (("InWrongs", "wrong"), ("InCorrects", "correct")):
        for carried in e.inputs(slot):
            if e.dtype(carried) != "int32":
                carried = e.node("Cast", [carried], to=i32)[0]
            if value == "wrong":
                wrong = e.node("Add", [wrong, carried])[0]
            else:
                correct = e.node("Add", [correct, carried])[0]
    e.node("Identity", [wrong], [e.output("OutWrong")])
    e.node("Identity", [correct], [e.output("OutCorrect")])
    total = e.node("Add", [wrong, correct])[0]
    one = e.const(1, "int32", "one")
    iou = e.node("Div", [e.node("Cast", [correct], to=f32)[0],
                         e.node("Cast", [e.node("Max", [total, one])[0]], to=f32)[0]])[0]
    occurring = e.node("Cast", [_count(e, e.node("Greater", [total, e.const(0, "int32",
                                                                          "zero")])[0])],
                       to=f32)[0]
    mean = e.node("Div", [e.node("ReduceSum", [iou], keepdims=0)[0],
                          e.node("Max", [occurring, e.const(1.0, "float32", "one")])[0]])[0]
    for carried in e.inputs("InMeanIou"):
        mean = e.node("Add", [mean, e.node("Reshape", [carried, e.ints([], "scalar")])[0]])[0]
    _as_one(e, mean, e.output("OutMeanIou"))
