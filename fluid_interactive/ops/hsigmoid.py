"""``hierarchical_sigmoid``: the hierarchical sigmoid loss, a class's probability as the
product of binary decisions along its path in a tree.

X [N, D], Label [N, 1] int64 (a label of another shape gives its first N values to the
N rows, as Paddle's kernel reads it), W [rows, D] (one row per inner node), Bias [rows, 1].
The default tree over ``num_classes`` is Paddle's complete binary tree: class c is the
code c + num_classes, its path the code's prefixes (node ``(code >> (j + 1)) - 1`` at step
j) and its decisions the code's bits (``(code >> j) & 1``), for ``L = bit_length(
num_classes - 1)`` steps at most. With PathTable and PathCode ([N, L] int64) each row
brings its own path (node ids, ended by a negative one) and decisions.

PreOut [N, L] = softplus(clip(w_node . x + b_node, -40, 40)) (0 scores past a path's end
give log 2, as Paddle keeps them); Out [N, 1] = sum of PreOut - sum over the path of
decision * score.
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as fmt
from .loss_common import check_range, check_rows, first_values
from .loss_grads import register_with_grad
from .sampled_loss import scatter_rows
from .spec import InferContext, KernelContext, dims_compatible

_ATTRS = {"num_classes": 2, "is_sparse": False, "remote_prefetch": False}
_IN = ("X", "W", "Label", "PathTable?", "PathCode?", "Bias?")


def code_length(num_classes: int) -> int:
    return max(int(num_classes - 1).bit_length(), 1)


def _infer(ctx: InferContext) -> None:
    x, _ = check_rows(ctx, "X", "Label", "hierarchical_sigmoid")
    w, k = ctx.input("W"), int(ctx.attrs["num_classes"])
    if w.rank != 2 or not dims_compatible(w.shape[1], x.shape[1]):
        ctx.fail(f"hierarchical_sigmoid: W must be [nodes, D] for X {fmt(x.shape)}, got "
                 f"{fmt(w.shape)}")
    custom = ctx.has_input("PathTable")
    if custom != ctx.has_input("PathCode"):
        ctx.fail("hierarchical_sigmoid: give both PathTable and PathCode, or neither")
    if custom:
        table, code = ctx.input("PathTable"), ctx.input("PathCode")
        if table.rank != 2 or tuple(table.shape[1:]) != tuple(code.shape[1:]):
            ctx.fail(f"hierarchical_sigmoid: PathTable and PathCode must both be [N, L], "
                     f"got {fmt(table.shape)} and {fmt(code.shape)}")
        length = table.shape[1]
    else:
        if k < 2:
            ctx.fail(f"hierarchical_sigmoid: num_classes must be >= 2, got {k}")
        if not dims_compatible(w.shape[0], k - 1):
            ctx.fail(f"hierarchical_sigmoid: the default tree over {k} classes has {k - 1} "
                     f"inner nodes, so W must be [{k - 1}, D], got {fmt(w.shape)}")
        length = code_length(k)
    ctx.set_output("Out", (x.shape[0], 1), x.dtype)
    ctx.set_output("PreOut", (x.shape[0], length), x.dtype)


class _Paths:
    """The nodes, decisions and valid steps [N, L] of a batch's paths."""

    def __init__(self, ctx: KernelContext):
        self.xp = ctx.xp
        self.n = ctx.input("X").shape[0]
        self.k = int(ctx.attrs["num_classes"])
        self.rows = ctx.input("W").shape[0]
        self.custom = ctx.has_input("PathTable")
        self.length = ctx.input("PathTable").shape[1] if self.custom else code_length(self.k)

    def __call__(self, label: Any, table: Any = None, code: Any = None
                 ) -> tuple[Any, Any, Any]:
        xp = self.xp
        if self.custom:
            valid = xp.cumprod(table >= 0, axis=1).astype(bool)
            nodes = xp.where(valid, table, 0)
            bits = xp.where(valid, code, 0)
        else:
            lab = first_values(label, self.n, "hierarchical_sigmoid: Label")
            lab = lab.reshape(self.n).astype("int64")
            check_range(xp, lab, self.k, "hierarchical_sigmoid: label")
            c = (lab + self.k)[:, None]
            steps = xp.arange(self.length)[None, :]
            nodes = xp.right_shift(c, steps + 1) - 1
            valid = nodes >= 0
            nodes = xp.where(valid, nodes, 0)
            bits = xp.bitwise_and(xp.right_shift(c, steps), 1)
        check_range(xp, xp.where(valid, nodes, 0), self.rows, "hierarchical_sigmoid: node")
        return nodes, bits * valid, valid


def _split(ctx: KernelContext, args: tuple) -> dict[str, Any]:
    names = [n.rstrip("?") for n in _IN if ctx.has_input(n.rstrip("?"))]
    return dict(zip(names, args))


def _kernel(ctx: KernelContext):
    xp = ctx.xp
    paths = _Paths(ctx)
    out, pre_buf = ctx.buffer("Out"), ctx.buffer("PreOut")

    def fn(*args):
        a = _split(ctx, args)
        nodes, bits, valid = paths(a["Label"], a.get("PathTable"), a.get("PathCode"))
        score = xp.einsum("nd,nld->nl", a["X"], a["W"][nodes])
        if "Bias" in a:
            score = score + a["Bias"].reshape(-1)[nodes]
        score = xp.clip(score * valid, -40.0, 40.0)
        bits = bits.astype(score.dtype)   # int64 bits would make the loss float64
        pre = xp.log1p(xp.exp(-xp.abs(score)))
        pre += xp.maximum(score, 0)
        loss = pre.sum(axis=1, keepdims=True) - (bits * score).sum(axis=1, keepdims=True)
        if pre_buf is not None:
            xp.copyto(pre_buf, pre)
            pre = pre_buf
        if out is None:
            return loss, pre
        xp.copyto(out, loss)
        return out, pre
    return fn


def _grad_kernel(ctx: KernelContext):
    """With s = sigmoid(score) = 1 - exp(-PreOut): d/dscore = (s - decision) dOut on the
    path (the clip is not differentiated, as in Paddle), then through the gathered rows."""
    xp = ctx.xp
    paths = _Paths(ctx)
    wants = [s for s in ("X", "W", "Bias") if ctx.has_output(f"{s}@GRAD")]
    n = ctx.input("X").shape[0]

    def fn(*args):
        a = _split(ctx, args[:-2])
        pre, dout = args[-2], args[-1]
        nodes, bits, valid = paths(a["Label"], a.get("PathTable"), a.get("PathCode"))
        g = (-xp.expm1(-pre) - bits) * valid * dout.reshape(n, 1)
        x, w = a["X"], a["W"]
        res = {"X": lambda: xp.einsum("nl,nld->nd", g, w[nodes]),
               "W": lambda: scatter_rows(xp, w.shape, nodes, g[:, :, None] * x[:, None, :]),
               "Bias": lambda: scatter_rows(xp, a["Bias"].shape, nodes, g[:, :, None])}
        out = tuple(res[s]().astype(x.dtype, copy=False) for s in wants)
        return out[0] if len(out) == 1 else out
    return fn


register_with_grad(
    "hierarchical_sigmoid", _IN, ("Out", "PreOut"), _infer, _kernel, _grad_kernel,
    uses=_IN + ("PreOut",), wrt=("X", "W", "Bias"), out_slot="Out", attrs=_ATTRS,
    doc="Hierarchical sigmoid loss Out [N, 1] of X [N, D] for the classes Label along "
        "Paddle's default binary tree over num_classes, or the paths PathTable / PathCode; "
        "W [nodes, D] and Bias [nodes, 1] score each inner node.")
