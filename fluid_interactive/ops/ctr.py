"""Ops of click-through-rate models: cvm and filter_by_instag.

``cvm``  X [N, D] (or a padded batch [B, T, D]) whose first two columns are an item's show
         and click counts. ``use_cvm``: Y [.., D] with those columns turned into
         ``log(show + 1)`` and ``log(click + 1) - log(show + 1)``; else Y [.., D - 2]
         without them. Its gradient is Paddle's, which is not the derivative: the show
         and click columns of X@GRAD are CVM [N, 2] (per row; [B, 2] per sequence of a
         padded batch), the counts a parameter server adds into an embedding's show/click
         columns, and the other columns are dY's.

``filter_by_instag``  keeps the instances (rows of Ins [B, D], or sequences of a padded
         Ins [B, T, D] with ``is_lod``) having a tag (Ins_tag [B, K], padded by
         InsTagLengths) among Filter_tag's: Out [K', ...] in their order, LossWeight
         float32 [K', 1] of ones, and IndexMap int64 [K', 3] = (output instance, input
         instance, rows): Paddle's map with instances for its row offsets (for rows of
         [B, D] the two agree). When none is kept: one row of ``out_val_if_empty``, a
         LossWeight of 0 and the map (0, 1, 1), as Paddle gives. K' is known when the op
         runs. The gradient puts dOut back at the kept instances' rows, times LossWeight.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .loss_common import LENGTH_DTYPES, check_lengths, row_lengths, time_mask
from .registry import register
from .rnn import Unpack
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, emit_default_grad, slots

# --- cvm ---------------------------------------------------------------------------------------


def _cvm_infer(ctx: InferContext) -> None:
    x, cvm = ctx.input("X"), ctx.input("CVM")
    if x.dtype not in FLOAT_DTYPES or x.rank not in (2, 3):
        ctx.fail(f"cvm: X must be a float [N, D] (or a padded batch [B, T, D]), got "
                 f"{x.dtype}{fmt(x.shape)}")
    if x.shape[-1] >= 0 and x.shape[-1] < 2:
        ctx.fail(f"cvm: X {fmt(x.shape)} must have at least 2 columns (show, click, ...)")
    if cvm.rank != 2 or not dims_compatible(cvm.shape[1], 2) or cvm.dtype != x.dtype or \
            not dims_compatible(cvm.shape[0], x.shape[0]):
        ctx.fail(f"cvm: CVM must be {x.dtype}[{'N' if x.rank == 2 else 'B'}, 2] (show, click "
                 f"per {'row' if x.rank == 2 else 'sequence'} of X {fmt(x.shape)}), got "
                 f"{cvm.dtype}{fmt(cvm.shape)}")
    if ctx.has_input("Lengths") and x.rank != 3:
        ctx.fail(f"cvm: lengths go with a padded batch X [B, T, D], got X {fmt(x.shape)}")
    check_lengths(ctx, "Lengths", x.shape[0], "cvm")
    d = x.shape[-1]
    width = d if ctx.attrs["use_cvm"] or d < 0 else d - 2
    ctx.set_output("Y", x.shape[:-1] + (width,), x.dtype)


def _valid_rows(ctx: KernelContext, xp: Any, lengths: tuple) -> Any:
    """[B, T, 1] bool of the rows inside their sequence, or None (every row)."""
    if not lengths:
        return None
    b, t = ctx.input("X").shape[:2]
    return time_mask(xp, row_lengths(xp, lengths[0], b, t, "cvm"), t)[..., None]


def _cvm_kernel(ctx: KernelContext) -> Callable:
    xp, use_cvm, out = ctx.xp, bool(ctx.attrs["use_cvm"]), ctx.buffer("Y")
    y_type = ctx.output("Y")

    def cvm(x: Any, cvm: Any, *lengths: Any) -> Any:
        valid = _valid_rows(ctx, xp, lengths)
        if valid is not None:     # padding may hold anything: none of it reaches the log
            x = xp.where(valid, x, 0)
        y = xp.empty(y_type.shape, y_type.dtype) if out is None else out
        xp.copyto(y, x[..., (0 if use_cvm else 2):])
        if use_cvm:
            show = xp.log1p(x[..., 0])
            y[..., 0] = show
            y[..., 1] = xp.log1p(x[..., 1]) - show
        return y
    return cvm


def _cvm_grad_kernel(ctx: KernelContext) -> Callable:
    xp, x = ctx.xp, ctx.input("X")
    skip = 2 if ctx.attrs["use_cvm"] else 0
    out = ctx.buffer("X@GRAD")

    def cvm_grad(_x: Any, cvm: Any, *rest: Any) -> Any:
        *lengths, dy = rest
        dx = xp.empty(x.shape, x.dtype) if out is None else out
        dx[..., 2:] = dy[..., skip:]
        dx[..., :2] = cvm if x.rank == 2 else cvm[:, None, :]
        valid = _valid_rows(ctx, xp, tuple(lengths))
        if valid is not None:
            xp.multiply(dx, valid, out=dx)
        return dx
    return cvm_grad


def _cvm_grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("X@GRAD", x.shape, x.dtype)


_CVM_ATTRS = {"use_cvm": True}
register(OpSpec("cvm", slots("X", "CVM", "Lengths?"), slots("Y"), _cvm_infer, _cvm_kernel,
                lambda g: emit_default_grad(g, ("X", "CVM", "Lengths"), "cvm_grad", ("X",),
                                            ("Y",)),
                attrs=_CVM_ATTRS,
                doc="Y = X with its show and click columns as log(show + 1) and log(click "
                    "+ 1) - log(show + 1) (use_cvm), or without them."))
register(OpSpec("cvm_grad", slots("X", "CVM", "Lengths?", "Y@GRAD"), slots("X@GRAD"),
                _cvm_grad_infer, _cvm_grad_kernel, attrs=_CVM_ATTRS, shape_only=("X",),
                doc="X@GRAD = CVM in the show and click columns (Paddle's rule), dY in the "
                    "others; zero at padding."))


# --- filter_by_instag ---------------------------------------------------------------------------

_INS_DTYPES = ("float32", "float64", "int32", "int64")


def _instag_infer(ctx: InferContext) -> None:
    ins, tags, filt = ctx.input("Ins"), ctx.input("Ins_tag"), ctx.input("Filter_tag")
    lod = bool(ctx.attrs["is_lod"])
    if ins.dtype not in _INS_DTYPES or ins.rank != (3 if lod else 2):
        form = "a padded batch [B, T, D] (is_lod=True)" if lod else "[B, D] (is_lod=False)"
        ctx.fail(f"filter_by_instag: Ins must be {form} of float32/64 or int32/64, got "
                 f"{ins.dtype}{fmt(ins.shape)}")
    if tags.dtype not in LENGTH_DTYPES or tags.rank not in (1, 2) or \
            not dims_compatible(tags.shape[0], ins.shape[0]):
        ctx.fail(f"filter_by_instag: Ins_tag must be int64 [B] or [B, K] (the tags of each "
                 f"of Ins's {ins.shape[0]} instances), got {tags.dtype}{fmt(tags.shape)}")
    if filt.dtype not in LENGTH_DTYPES:
        ctx.fail_dtype(f"filter_by_instag: Filter_tag must be int64 tags, got {filt.dtype}")
    if ctx.has_input("InsLengths") and not lod:
        ctx.fail("filter_by_instag: ins_lengths go with is_lod=True (Ins a padded batch)")
    check_lengths(ctx, "InsLengths", ins.shape[0], "filter_by_instag")
    check_lengths(ctx, "InsTagLengths", tags.shape[0], "filter_by_instag")
    ctx.set_output("Out", (-1,) + ins.shape[1:], ins.dtype)   # as many as are kept
    ctx.set_output("LossWeight", (-1, 1), "float32")
    ctx.set_output("IndexMap", (-1, 3), "int64")
    ctx.set_output("OutLengths", (-1,), "int64")


def _instag_kernel(ctx: KernelContext) -> Callable:
    xp, ins_t = ctx.xp, ctx.input("Ins")
    b, rest = ins_t.shape[0], ins_t.shape[1:]
    unpack = Unpack(ctx, ("InsLengths", "InsTagLengths"))
    empty = _empty_result(ctx)

    def filter_by_instag(ins: Any, tags: Any, filt: Any, *lengths: Any) -> tuple:
        got = unpack(lengths)
        tags = tags.reshape(b, -1)
        hit = _among(xp, tags, filt.reshape(-1))
        if "InsTagLengths" in got:
            hit &= time_mask(xp, row_lengths(xp, got["InsTagLengths"], b, tags.shape[1],
                                             "filter_by_instag: ins_tag_lengths"),
                             tags.shape[1])
        kept = xp.nonzero(hit.any(axis=1))[0]
        if kept.size == 0:
            return empty()
        rows = xp.ones(b, "int64") if len(rest) == 1 else xp.full(b, rest[0], "int64")
        if "InsLengths" in got:
            rows = row_lengths(xp, got["InsLengths"], b, rest[0],
                               "filter_by_instag: ins_lengths").astype("int64")
        out = ins[kept]
        if len(rest) == 2:       # nothing of the padding: zeros past each kept length
            out = xp.where(time_mask(xp, rows[kept], rest[0])[..., None], out, 0)
        n = kept.size
        index_map = xp.stack([xp.arange(n), kept, rows[kept]], axis=1).astype("int64")
        outs = (out, xp.ones((n, 1), "float32"), index_map, index_map[:, 2].copy())
        return outs if ctx.has_output("OutLengths") else outs[:3]
    return filter_by_instag


def _among(xp: Any, values: Any, wanted: Any) -> Any:
    """Whether each of ``values`` is one of ``wanted`` (sorted once, then a binary search
    per value: no [values x wanted] table)."""
    if wanted.size == 0:
        return xp.zeros(values.shape, bool)
    ordered = xp.sort(wanted)
    at = xp.minimum(xp.searchsorted(ordered, values), wanted.size - 1)
    return ordered[at] == values


def _empty_result(ctx: KernelContext) -> Callable[[], tuple]:
    """Paddle's result when no instance is kept: one row of out_val_if_empty."""
    xp, ins_t = ctx.xp, ctx.input("Ins")
    fill = ctx.attrs["out_val_if_empty"]

    def empty() -> tuple:
        out = xp.zeros((1,) + ins_t.shape[1:], ins_t.dtype)
        (out if ins_t.rank == 2 else out[:, 0]).fill(fill)
        index_map = xp.ones((1, 3), "int64")
        index_map[0, 0] = 0
        outs = (out, xp.zeros((1, 1), "float32"), index_map, xp.ones(1, "int64"))
        return outs if ctx.has_output("OutLengths") else outs[:3]
    return empty


def _instag_grad_kernel(ctx: KernelContext) -> Callable:
    """dIns = dOut at the kept instances' rows, times LossWeight (0 when none was kept:
    then IndexMap's (0, 1, 1) names no real row)."""
    xp, ins_t = ctx.xp, ctx.input("Ins")
    b = ins_t.shape[0]

    def filter_by_instag_grad(_ins: Any, index_map: Any, weight: Any, dout: Any) -> Any:
        dx = xp.zeros(ins_t.shape, ins_t.dtype)
        if b == 0:
            return dx
        g = dout * weight.reshape((-1,) + (1,) * (ins_t.rank - 1)).astype(ins_t.dtype)
        if ins_t.rank == 3:
            g = xp.where(time_mask(xp, index_map[:, 2], ins_t.shape[1])[..., None], g, 0)
        dx[xp.minimum(index_map[:, 1], b - 1)] = g
        return dx
    return filter_by_instag_grad


def _instag_grad_infer(ctx: InferContext) -> None:
    ins = ctx.input("Ins")
    ctx.set_output("Ins@GRAD", ins.shape, ins.dtype)


_INSTAG_ATTRS = {"is_lod": True, "out_val_if_empty": 0}
register(OpSpec("filter_by_instag",
                slots("Ins", "Ins_tag", "Filter_tag", "InsLengths?", "InsTagLengths?"),
                slots("Out", "LossWeight", "IndexMap", "OutLengths?"), _instag_infer,
                _instag_kernel,
                lambda g: emit_default_grad(g, ("Ins", "IndexMap", "LossWeight"),
                                            "filter_by_instag_grad", ("Ins",), ("Out",)),
                attrs=_INSTAG_ATTRS, host_access="reads",
                doc="The instances of Ins with a tag among Filter_tag's, LossWeight of ones "
                    "(one 0 when none: a row of out_val_if_empty) and IndexMap (output, "
                    "input, rows); their number is known when the op runs."))
register(OpSpec("filter_by_instag_grad",
                slots("Ins", "IndexMap", "LossWeight", "Out@GRAD"), slots("Ins@GRAD"),
                _instag_grad_infer, _instag_grad_kernel, attrs=_INSTAG_ATTRS,
                shape_only=("Ins",),
                doc="Ins@GRAD = dOut at the rows of the kept instances, times LossWeight."))
