"""Sequence ops that move a padded batch's positions: X [B, T, ...] plus int Lengths [B].

``sequence_pad``     Out [B, padded_length, ...]: each row's valid positions, PadValue after
                     them; Length: the lengths (int64 [B]). ``padded_length=-1`` takes the
                     longest length (read back on a device)
``sequence_unpad``   Out = X with zeros at or past each row's length (the padded form of
                     Paddle's LoD result; its lengths are the Length input)
``sequence_expand``  Out [B, Ty, ...] = X[b] (one item per row) repeated YLengths[b] times;
                     with XLengths, X [B, Tx, ...] is a sequence per row and Out
                     [B, Ty, Tx, ...] holds YLengths[b] copies of it
``sequence_slice``   Out[b, t] = X[b, Offset[b] + t] for t < Length[b]
``sequence_concat``  each row's valid positions of X_1, X_2, ... one after another;
                     OutLengths: their sum

Outputs are zero at or past their own lengths (sequence_pad's PadValue there), and what
padding holds never reaches an output or a gradient.
"""
from __future__ import annotations

from typing import Any

from ..ir.records import INT_DTYPES
from ..ir.text import format_shape as _fmt
from .registry import register
from .rnn import LENGTH_DTYPES, Unpack, check_lengths, new_or
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    dims_compatible,
    emit_default_grad,
    infer_like,
    slots,
)


def check_len_slot(ctx: InferContext, slot: str, batch: int, what: str) -> None:
    """An optional lengths-like input of ``slot``: int [B] (or [B, 1])."""
    if not ctx.has_input(slot):
        return
    n = ctx.input(slot)
    if n.dtype not in LENGTH_DTYPES:
        ctx.fail_dtype(f"{what}: {slot} must be int64 (or int32), got {n.dtype}")
    if not (n.rank == 1 or (n.rank == 2 and n.shape[1] == 1)) or \
            not dims_compatible(n.shape[0], batch):
        ctx.fail(f"{what}: {slot} must be [B] with one value per row of the batch "
                 f"(B = {batch}), got {_fmt(n.shape)}")


def padded_input(ctx: InferContext, what: str, slot: str = "X", min_rank: int = 2):
    x = ctx.input(slot)
    if x.rank < min_rank:
        ctx.fail(f"{what}: {slot} must be a padded batch [B, T, ...], got {_fmt(x.shape)}")
    return x


def batch_with_lengths(ctx: InferContext, what: str):
    """X, a padded batch [B, T, ...], and its optional Lengths [B], checked."""
    x = padded_input(ctx, what)
    check_len_slot(ctx, "Lengths", x.shape[0], what)
    return x


def on_host(xp: Any) -> bool:
    """Whether values may be read for a check without a device round trip."""
    return xp.__name__ == "numpy"


def row_lengths(xp: Any, lengths: Any, batch: int, time: int) -> Any:
    """Lengths as a flat int array, checked on the host; T for every row without them."""
    if lengths is None:
        return xp.full((batch,), time, "int64")
    n = lengths.reshape(batch)
    if on_host(xp) and n.size:
        check_lengths(n, time)
    return n


def time_mask(xp: Any, n: Any, time: int, rank: int) -> Any:
    """[B, T, 1, ...] (``rank`` dims) bool: t < n[b]."""
    m = xp.arange(time).reshape(1, time) < n.reshape(-1, 1)
    return m.reshape(m.shape + (1,) * (rank - 2))


def masked(xp: Any, out: Any, x: Any, mask: Any, fill: Any = 0) -> Any:
    """``out`` = x where mask, else fill; exact (a NaN not selected never reaches out)."""
    xp.copyto(out, fill)
    xp.copyto(out, x, where=mask)
    return out


def wanted(ctx: KernelContext, grad_slots: tuple[str, ...]) -> list[str]:
    """The gradient output slots this grad op writes, in slot order."""
    return [s for s in grad_slots if ctx.has_output(s)]


def one_or_tuple(got: list) -> Any:
    """A kernel's outputs: the array alone, or a tuple of several."""
    return got[0] if len(got) == 1 else tuple(got)


def _x_grad(g: GradContext, grad_type: str, uses: tuple[str, ...],
            outs: tuple[str, ...] = ("Out",)) -> None:
    emit_default_grad(g, uses, grad_type, ("X",), outs)


# --- sequence_unpad ----------------------------------------------------------------------------

def _unpad_infer(ctx: InferContext) -> None:
    x = batch_with_lengths(ctx, "sequence_unpad")
    ctx.set_output("Out", x.shape, x.dtype)


def _unpad_kernel(ctx: KernelContext):
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("Out")

    def unpad(a, lengths):
        n = row_lengths(xp, lengths, x.shape[0], x.shape[1])
        return masked(xp, new_or(out, xp, x.shape, x.dtype), a, time_mask(xp, n, x.shape[1],
                                                                          x.rank))
    return unpad


def _unpad_grad(g: GradContext) -> None:
    """Zeroing the padding is its own adjoint."""
    dout, dx = g.flowing("Out"), g.in_grad("X")
    if dout is not None and dx and dx[0]:
        g.emit("sequence_unpad", {"X": [dout], "Lengths": g.input("Lengths")}, {"Out": dx})


register(OpSpec("sequence_unpad", slots("X", "Lengths"), slots("Out"), _unpad_infer,
                _unpad_kernel, _unpad_grad,
                doc="Out = X with zeros at or past each row's length: a padded batch whose "
                    "padding is clean"))


# --- sequence_pad --------------------------------------------------------------------------------

def _pad_infer(ctx: InferContext) -> None:
    x = batch_with_lengths(ctx, "sequence_pad")
    length = int(ctx.attrs["padded_length"])
    if length < -1:
        ctx.fail(f"sequence_pad: padded_length must be >= 0 (or -1: the longest length), "
                 f"got {length}")
    if ctx.has_input("PadValue"):
        p = ctx.input("PadValue")
        if p.dtype != x.dtype:
            ctx.fail_dtype(f"sequence_pad: PadValue is {p.dtype} but X is {x.dtype}")
        if p.shape not in ((), (1,)) and not (p.rank == x.rank - 2 and all(
                dims_compatible(a, b) for a, b in zip(p.shape, x.shape[2:]))):
            ctx.fail(f"sequence_pad: PadValue must be [1] or one step's shape "
                     f"{_fmt(x.shape[2:])}, got {_fmt(p.shape)}")
    ctx.set_output("Out", (x.shape[0], length) + x.shape[2:], x.dtype)
    ctx.set_output("Length", (x.shape[0],), "int64")


def _pad_length(xp: Any, n: Any, padded_length: int) -> int:
    if padded_length < 0:
        return int(n.max()) if n.size else 0
    if on_host(xp) and n.size and int(n.max()) > padded_length:
        raise ValueError(f"sequence_pad: padded_length {padded_length} is shorter than the "
                         f"longest sequence ({int(n.max())}); give padded_length >= it, or "
                         f"-1 for the longest length")
    return padded_length


def _pad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    unpack = Unpack(ctx, ("X", "PadValue", "Lengths"))
    padded_length = int(ctx.attrs["padded_length"])
    rest = x.shape[2:]

    def pad(*args):
        a = unpack(args)
        n = row_lengths(xp, a.get("Lengths"), x.shape[0], x.shape[1])
        maxlen = _pad_length(xp, n, padded_length)
        out = xp.empty((x.shape[0], maxlen) + rest, x.dtype)
        fill = a["PadValue"].reshape(rest if a["PadValue"].size > 1 else ()) \
            if "PadValue" in a else 0
        k = min(maxlen, x.shape[1])
        xp.copyto(out, fill)
        xp.copyto(out[:, :k], a["X"][:, :k], where=time_mask(xp, n, k, x.rank))
        return out, n.astype("int64")
    return pad


def _pad_grad_kernel(ctx: KernelContext):
    """dX: dOut at each row's valid positions; dPadValue: dOut summed over the rest."""
    xp, x = ctx.xp, ctx.input("X")
    unpack = Unpack(ctx, ("X", "PadValue", "Lengths", "Out@GRAD"))
    wants = wanted(ctx, ("X@GRAD", "PadValue@GRAD"))
    pad_shape = ctx.input("PadValue").shape if ctx.has_input("PadValue") else ()

    def pad_grad(*args):
        a = unpack(args)
        dout = a["Out@GRAD"]
        n = row_lengths(xp, a.get("Lengths"), x.shape[0], x.shape[1])
        k = min(dout.shape[1], x.shape[1])
        got = []
        if "X@GRAD" in wants:
            dx = xp.zeros(x.shape, x.dtype)
            xp.copyto(dx[:, :k], dout[:, :k], where=time_mask(xp, n, k, x.rank))
            got.append(dx)
        if "PadValue@GRAD" in wants:
            rest = xp.where(time_mask(xp, n, dout.shape[1], dout.ndim), 0, dout)
            axes = (0, 1) if tuple(pad_shape) == dout.shape[2:] else None
            got.append(rest.sum(axis=axes).reshape(pad_shape).astype(x.dtype))
        return one_or_tuple(got)
    return pad_grad


register(OpSpec("sequence_pad", slots("X", "PadValue?", "Lengths?"), slots("Out", "Length"),
                _pad_infer, _pad_kernel,
                lambda g: emit_default_grad(g, ("X", "PadValue", "Lengths"),
                                            "sequence_pad_grad", ("X", "PadValue")),
                attrs={"padded_length": -1},
                host_access="reads",
                doc="Out [B, padded_length, ...]: each row's valid positions then PadValue; "
                    "Length: the lengths. padded_length=-1: the longest length."))
register(OpSpec("sequence_pad_grad", slots("X", "PadValue?", "Lengths?", "Out@GRAD"),
                slots("X@GRAD?", "PadValue@GRAD?"),
                infer_like({"X@GRAD": "X", "PadValue@GRAD": "PadValue"}), _pad_grad_kernel,
                attrs={"padded_length": -1}, shape_only=("X", "PadValue")))


# --- sequence_expand -----------------------------------------------------------------------------

def _expand_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), padded_input(ctx, "sequence_expand", "Y")
    if x.rank < 1 or not dims_compatible(x.shape[0], y.shape[0]):
        ctx.fail(f"sequence_expand: X {_fmt(x.shape)} must have one row per row of Y "
                 f"{_fmt(y.shape)} (the sequences whose lengths say how often to repeat it)")
    if ctx.has_input("XLengths") and x.rank < 2:
        ctx.fail(f"sequence_expand: with XLengths, X must be a padded batch [B, Tx, ...], "
                 f"got {_fmt(x.shape)}")
    check_len_slot(ctx, "XLengths", x.shape[0], "sequence_expand")
    check_len_slot(ctx, "YLengths", y.shape[0], "sequence_expand")
    ctx.set_output("Out", (x.shape[0], y.shape[1]) + x.shape[1:], x.dtype)


def _expand_masks(ctx: KernelContext):
    """fn(args) -> (x, mask of Out): YLengths over the repeats, XLengths over X's steps."""
    xp, x, y = ctx.xp, ctx.input("X"), ctx.input("Y")
    unpack = Unpack(ctx, ("X", "XLengths", "Y", "YLengths", "Out@GRAD"))
    rank = x.rank + 1

    def masks(args):
        a = unpack(args)
        m = time_mask(xp, row_lengths(xp, a.get("YLengths"), y.shape[0], y.shape[1]),
                      y.shape[1], rank)
        if "XLengths" in a:
            inner = row_lengths(xp, a["XLengths"], x.shape[0], x.shape[1])
            m = m & time_mask(xp, inner, x.shape[1], x.rank)[:, None]
        return a, m
    return masks


def _expand_kernel(ctx: KernelContext):
    xp, out, t = ctx.xp, ctx.buffer("Out"), ctx.output("Out")
    masks = _expand_masks(ctx)

    def expand(*args):
        a, m = masks(args)
        return masked(xp, new_or(out, xp, t.shape, t.dtype), a["X"][:, None], m)
    return expand


def _expand_grad_kernel(ctx: KernelContext):
    """dX[b] = the sum of dOut over the repeats of row b (at X's valid steps)."""
    xp = ctx.xp
    masks = _expand_masks(ctx)

    def expand_grad(*args):
        a, m = masks(args)
        return xp.where(m, a["Out@GRAD"], 0).sum(axis=1)
    return expand_grad


register(OpSpec("sequence_expand", slots("X", "XLengths?", "Y", "YLengths?"), slots("Out"),
                _expand_infer, _expand_kernel,
                lambda g: _x_grad(g, "sequence_expand_grad", ("X", "XLengths", "Y",
                                                              "YLengths")),
                attrs={"ref_level": -1}, shape_only=("Y",),
                doc="Out[b, r] = X[b] for r < YLengths[b], else 0: each row of X repeated as "
                    "often as row b of Y is long"))
register(OpSpec("sequence_expand_grad", slots("X", "XLengths?", "Y", "YLengths?", "Out@GRAD"),
                slots("X@GRAD"), infer_like({"X@GRAD": "X"}), _expand_grad_kernel,
                attrs={"ref_level": -1}, shape_only=("X", "Y")))


# --- sequence_slice ------------------------------------------------------------------------------

def _slice_infer(ctx: InferContext) -> None:
    x = padded_input(ctx, "sequence_slice")
    for slot in ("Offset", "Length", "Lengths"):
        check_len_slot(ctx, slot, x.shape[0], "sequence_slice")
    ctx.set_output("Out", x.shape, x.dtype)


def _slice_where(ctx: KernelContext):
    """fn(args) -> (args, offsets [B, 1], mask [B, T] of the slice's positions), checked."""
    xp, x = ctx.xp, ctx.input("X")
    unpack = Unpack(ctx, ("X", "Offset", "Length", "Lengths", "Out@GRAD"))
    batch, time = x.shape[0], x.shape[1]

    def where(args):
        a = unpack(args)
        n = row_lengths(xp, a.get("Lengths"), batch, time)
        off, ln = a["Offset"].reshape(batch, 1), a["Length"].reshape(batch, 1)
        if on_host(xp) and batch and (
                (off < 0).any() or (ln < 0).any() or (off + ln > n.reshape(-1, 1)).any()):
            raise ValueError("sequence_slice: each row needs 0 <= offset and 0 <= length and "
                             "offset + length <= its sequence length")
        return a, off, xp.arange(time).reshape(1, time) < ln
    return where


def _slice_kernel(ctx: KernelContext, backward: bool = False):
    """Forward: Out[b, t] = X[b, Offset[b] + t] inside the slice; backward: dX[b, s] =
    dOut[b, s - Offset[b]] inside it; zero elsewhere."""
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("X@GRAD" if backward else "Out")
    where = _slice_where(ctx)
    rows, t_row = xp.arange(x.shape[0]).reshape(-1, 1), xp.arange(x.shape[1]).reshape(1, -1)

    def slice_(*args):
        a, off, m = where(args)
        if backward:
            src, src_slot = t_row - off, "Out@GRAD"
            m = (src >= 0) & (src < m.sum(axis=1, keepdims=True))
        else:
            src, src_slot = off + t_row, "X"
        gathered = a[src_slot][rows, xp.where(m, src, 0)]
        return masked(xp, new_or(out, xp, x.shape, x.dtype), gathered,
                      m.reshape(m.shape + (1,) * (x.rank - 2)))
    return slice_


register(OpSpec("sequence_slice", slots("X", "Offset", "Length", "Lengths?"), slots("Out"),
                _slice_infer, _slice_kernel,
                lambda g: _x_grad(g, "sequence_slice_grad", ("X", "Offset", "Length",
                                                             "Lengths")),
                host_access="reads",
                doc="Out[b, t] = X[b, Offset[b] + t] for t < Length[b], else 0"))
register(OpSpec("sequence_slice_grad", slots("X", "Offset", "Length", "Lengths?", "Out@GRAD"),
                slots("X@GRAD"), infer_like({"X@GRAD": "X"}),
                lambda ctx: _slice_kernel(ctx, backward=True),
                shape_only=("X",), host_access="reads"))


# --- sequence_concat -----------------------------------------------------------------------------

def _concat_infer(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    first = xs[0]
    if first.rank < 2:
        ctx.fail(f"sequence_concat: each input must be a padded batch [B, T, ...], got "
                 f"{_fmt(first.shape)}")
    for t in xs[1:]:
        if t.dtype != first.dtype or t.rank != first.rank or not all(
                dims_compatible(a, b) for a, b in zip(t.shape[:1] + t.shape[2:],
                                                      first.shape[:1] + first.shape[2:])):
            ctx.fail(f"sequence_concat: inputs {_fmt(first.shape)} {first.dtype} and "
                     f"{_fmt(t.shape)} {t.dtype} differ in batch, step shape or dtype")
    lengths = ctx.inputs("Lengths")
    if lengths and len(lengths) != len(xs):
        ctx.fail(f"sequence_concat: give one lengths var per input ({len(xs)}), or none; "
                 f"got {len(lengths)}")
    for n in lengths:
        if n.dtype not in INT_DTYPES or n.rank != 1:
            ctx.fail(f"sequence_concat: lengths must be int [B], got {n.dtype}{_fmt(n.shape)}")
    time = -1 if any(t.shape[1] < 0 for t in xs) else sum(t.shape[1] for t in xs)
    ctx.set_output("Out", (first.shape[0], time) + first.shape[2:], first.dtype)
    ctx.set_output("OutLengths", (first.shape[0],), "int64")


def _concat_places(ctx: KernelContext, k: int):
    """fn(lengths...) -> [(flat destination [B, T_i], mask [B, T_i])] per input, and the
    output lengths: input i's step t of row b lands at its row's offset + t."""
    xp, xs = ctx.xp, ctx.inputs("X")
    batch, total = xs[0].shape[0], sum(t.shape[1] for t in xs)
    base = (xp.arange(batch) * total).reshape(-1, 1)

    def places(lengths):
        ns = [row_lengths(xp, lengths[i] if lengths else None, batch, xs[i].shape[1])
              for i in range(k)]
        offset, got = xp.zeros((batch, 1), "int64"), []
        for t, n in zip(xs, ns):
            t_row = xp.arange(t.shape[1]).reshape(1, -1)
            got.append((base + offset + t_row, t_row < n.reshape(-1, 1)))
            offset = offset + n.reshape(-1, 1)
        return got, offset.reshape(batch)
    return places, batch, total


def _concat_kernel(ctx: KernelContext):
    xp, xs, k = ctx.xp, ctx.inputs("X"), len(ctx.inputs("X"))
    places, batch, total = _concat_places(ctx, k)
    step = xs[0].shape[2:]

    def concat(*args):
        got, n_out = places(args[k:])
        out = xp.zeros((batch * total,) + step, xs[0].dtype)
        for a, (dest, m) in zip(args[:k], got):
            out[dest[m]] = a[m]
        return out.reshape((batch, total) + step), n_out
    return concat


def _concat_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Lengths"), "sequence_concat_grad", ("X",))


def _concat_grad_kernel(ctx: KernelContext):
    """dX_i: dOut read back from where X_i's valid steps landed."""
    xp, xs, k = ctx.xp, ctx.inputs("X"), len(ctx.inputs("X"))
    places, batch, total = _concat_places(ctx, k)
    has_len = ctx.has_input("Lengths")

    def concat_grad(*args):
        lengths = args[k:2 * k] if has_len else ()
        dout = args[-1]
        flat = dout.reshape((batch * total,) + dout.shape[2:])
        got, _ = places(lengths)
        grads = []
        for t, (dest, m) in zip(xs, got):
            dx = xp.zeros(t.shape, t.dtype)
            dx[m] = flat[dest[m]]
            grads.append(dx)
        return one_or_tuple(grads)
    return concat_grad


register(OpSpec("sequence_concat", slots("X*", "Lengths*"), slots("Out", "OutLengths"),
                _concat_infer, _concat_kernel, _concat_grad,
                doc="Each row's valid steps of every X, one input after another, then zeros; "
                    "OutLengths: the summed lengths"))
register(OpSpec("sequence_concat_grad", slots("X*", "Lengths*", "Out@GRAD"), slots("X@GRAD*"),
                infer_like({"X@GRAD": "X"}), _concat_grad_kernel, shape_only=("X",)))
