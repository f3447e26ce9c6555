"""Export rules of Paddle 1.8's products and norms: dot, bmm, addmm, fsp,
bilinear_tensor_product, dist, norm (l2_normalize), cos_sim, clip_by_norm, and
elementwise_floordiv."""
from __future__ import annotations

from math import inf

from .export_math import aligned_operand
from .export_registry import OpExport, export_rule


def _sum(e: OpExport, x: str, axes: list[int], keep: bool, out: list[str] | None = None) -> str:
    return e.node("ReduceSum", [x, e.ints(axes)], out, keepdims=int(keep))[0]


def _square_sum(e: OpExport, x: str, axes: list[int], keep: bool = True) -> str:
    return _sum(e, e.node("Mul", [x, x])[0], axes, keep)


@export_rule("dot")
def _dot(e: OpExport) -> None:
    x, y = e.input("X"), e.input("Y")
    _sum(e, e.node("Mul", [x, y])[0], [-1], True, [e.output("Out")])


@export_rule("bmm")
def _bmm(e: OpExport) -> None:
    e.node("MatMul", [e.input("X"), e.input("Y")], [e.output("Out")])


@export_rule("addmm")
def _addmm(e: OpExport) -> None:
    e.node("Gemm", [e.input("X"), e.input("Y"), e.input("Input")], [e.output("Out")],
           alpha=float(e.attrs["Alpha"]), beta=float(e.attrs["Beta"]))


@export_rule("fsp")
def _fsp(e: OpExport) -> None:
    """X [N, C1, H*W] @ Y [N, C2, H*W]^T / (H*W)."""
    x, y = e.input("X"), e.input("Y")
    _, c1, h, w = e.shape(x)
    c2 = e.shape(y)[1]
    a = e.node("Reshape", [x, e.ints([0, c1, h * w], "shape")])[0]
    b = e.node("Reshape", [y, e.ints([0, c2, h * w], "shape")])[0]
    product = e.node("MatMul", [a, e.node("Transpose", [b], perm=[0, 2, 1])[0]])[0]
    e.node("Mul", [product, e.scalar(1.0 / (h * w), x, "share")], [e.output("Out")])


@export_rule("bilinear_tensor_product")
def _bilinear(e: OpExport) -> None:
    """X @ Weight as [M, size * N], then each [size, N] block dotted with Y."""
    x, y, weight = e.input("X"), e.input("Y"), e.input("Weight")
    k, m, n = e.shape(weight)
    flat = e.node("Reshape", [e.node("Transpose", [weight], perm=[1, 0, 2])[0],
                              e.ints([m, k * n], "shape")])[0]
    blocks = e.node("Reshape", [e.node("MatMul", [x, flat])[0], e.ints([0, k, n], "shape")])[0]
    rows = e.node("Unsqueeze", [y, e.ints([1])])[0]
    has_bias = e.has_input("Bias")
    out = _sum(e, e.node("Mul", [blocks, rows])[0], [2], False,
               None if has_bias else [e.output("Out")])
    if has_bias:
        e.node("Add", [out, e.input("Bias")], [e.output("Out")])


@export_rule("dist")
def _dist(e: OpExport) -> None:
    """The p-norm of X - Y as a [1] tensor."""
    x, y, p = e.input("X"), e.input("Y"), float(e.attrs["p"])
    d = e.node("Abs", [e.node("Sub", [x, y])[0]])[0]
    rank = max(len(e.shape(x)), len(e.shape(y)))
    axes = list(range(rank))
    if p in (inf, -inf):
        node = "ReduceMax" if p == inf else "ReduceMin"
        if e.opset >= 18:
            value = e.node(node, [d, e.ints(axes)], keepdims=0)[0]
        else:
            value = e.node(node, [d], axes=axes, keepdims=0)[0]
    elif p == 0:
        nonzero = e.node("Not", [e.node("Equal", [d, e.scalar(0.0, x, "zero")])[0]])[0]
        value = _sum(e, e.node("Cast", [nonzero], to=e.onnx_dtype(e.dtype(x)))[0], axes,
                     False)
    else:
        powered = e.node("Pow", [d, e.scalar(p, x, "p")])[0]
        value = e.node("Pow", [_sum(e, powered, axes, False), e.scalar(1.0 / p, x, "root")])[0]
    e.node("Reshape", [value, e.ints([1], "shape")], [e.output("Out")])


@export_rule("norm")
def _norm(e: OpExport) -> None:
    """Norm = sqrt(sum(X^2 along axis) + epsilon), Out = X / Norm."""
    x = e.input("X")
    total = _square_sum(e, x, [int(e.attrs["axis"])])
    shifted = e.node("Add", [total, e.scalar(float(e.attrs["epsilon"]), x, "epsilon")])[0]
    norm = e.node("Sqrt", [shifted], [e.output("Norm")])[0]
    e.node("Div", [x, norm], [e.output("Out")])


@export_rule("cos_sim")
def _cos_sim(e: OpExport) -> None:
    """Per row: <x, y> / (|x| |y|), the squared norms clamped below at 1e-8."""
    x, y = e.input("X"), e.input("Y")
    a = e.node("Flatten", [x], axis=1)[0]
    b = e.node("Flatten", [y], axis=1)[0]

    def norm(v: str, out: str) -> str:
        clamped = e.node("Max", [_square_sum(e, v, [1]), e.scalar(1e-8, x, "eps")])[0]
        return e.node("Sqrt", [clamped], [out])[0]
    xn, yn = norm(a, e.output("XNorm")), norm(b, e.output("YNorm"))
    inner = _sum(e, e.node("Mul", [a, b])[0], [1], True)
    e.node("Div", [inner, e.node("Mul", [xn, yn])[0]], [e.output("Out")])


@export_rule("clip_by_norm")
def _clip_by_norm(e: OpExport) -> None:
    """X * min(1, max_norm / |X|)."""
    x = e.input("X")
    norm = e.node("Sqrt", [_square_sum(e, x, list(range(len(e.shape(x)))), keep=False)])[0]
    ratio = e.node("Mul", [e.node("Reciprocal", [norm])[0],
                           e.scalar(float(e.attrs["max_norm"]), x, "max_norm")])[0]
    factor = e.node("Min", [ratio, e.scalar(1.0, x, "one")])[0]
    e.node("Mul", [x, factor], [e.output("Out")])


@export_rule("elementwise_floordiv")
def _floordiv(e: OpExport) -> None:
    """floor(X / Y) = (X - X mod Y) / Y, the remainder with Y's sign (exact for ints)."""
    x = e.input("X")
    y = aligned_operand(e, x, e.input("Y"), e.attrs["axis"])
    if not e.dtype(x).startswith("int"):
        e.node("Floor", [e.node("Div", [x, y])[0]], [e.output("Out")])
        return
    rest = e.node("Mod", [x, y], fmod=0)[0]
    e.node("Div", [e.node("Sub", [x, rest])[0], y], [e.output("Out")])
