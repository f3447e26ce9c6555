"""``sum`` (adds a list of tensors; backward uses it to accumulate gradients),
``fill_zeros_like`` and ``assign``.

Each also takes rows-only values (vars of kind ``selected_rows``, `SelectedRows`): ``sum``
of rows-only gradients lists every part's rows (an id in two parts twice), of rows-only
and dense ones is dense.

Each also takes tensor arrays (vars of kind ``tensor_array``: lists of tensors, where a
gradient array may hold None for a zero element; `ops/array_value.py`): ``sum`` adds them
element by element, ``fill_zeros_like`` gives the empty array (all zero) and ``assign``
the same value (arrays never change).
"""
from __future__ import annotations

from ..ir.records import SELECTED_ROWS
from ..ir.text import format_shape
from ..util.selected_rows import SelectedRows
from .array_value import TensorArray
from .layouts import LayoutRule
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, present, slots

_NO_ELEMENTS = TensorArray()


def _sum_infer(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    if not xs:
        ctx.fail("sum needs at least one input")
    first = xs[0]
    for i, t in enumerate(xs[1:], 1):
        if t.dtype != first.dtype or len(t.shape) != len(first.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(t.shape, first.shape)):
            ctx.fail(f"sum inputs must share shape and dtype: input 0 is "
                     f"{first.dtype}{format_shape(first.shape)}, input {i} is "
                     f"{t.dtype}{format_shape(t.shape)}")
    kinds = {t.kind for t in xs}
    kind = first.kind if len(kinds) == 1 else "tensor"   # rows only and dense: dense
    ctx.set_output("Out", first.shape, first.dtype, kind)


def _sum_kernel(ctx: KernelContext):
    add = ctx.xp.add
    if ctx.output("Out").kind == SELECTED_ROWS:
        return _sum_rows(ctx.xp)
    if any(t.kind == SELECTED_ROWS for t in ctx.in_types):
        return _sum_dense(ctx, add)
    if ctx.output("Out").kind == "tensor_array":
        def add_arrays(*xs):   # element by element, an element never written is zero
            acc = xs[0]
            for x in xs[1:]:
                acc = acc.add(x, add)
            return acc
        return add_arrays
    out = ctx.buffer("Out")

    def fn(*xs):
        acc = add(xs[0], xs[1], out=out)
        for x in xs[2:]:   # into the buffer, or anew: NumPy gives 0-d sums as scalars
            acc = add(acc, x, out=out)
        return acc

    if len(ctx.in_types) == 1:
        return lambda x: x
    return fn


def _sum_rows(xp):
    """Rows-only parts: every part's rows, one after another (duplicates stay listed)."""
    def concatenate(*xs):
        if len(xs) == 1:
            return xs[0]
        return SelectedRows(xp.concatenate([x.rows for x in xs]),
                            xp.concatenate([x.values for x in xs]), xs[0].height)
    return concatenate


def _sum_dense(ctx: KernelContext, add):
    """Rows-only and dense parts: the dense sum, each rows-only part densified, added in
    order (the values of an all-dense sum of the same gradients)."""
    out, xp = ctx.buffer("Out"), ctx.xp

    def dense(x):
        return x.to_dense(xp) if isinstance(x, SelectedRows) else x

    def fn(*xs):
        acc = add(dense(xs[0]), dense(xs[1]), out=out)
        for x in xs[2:]:
            acc = add(acc, dense(x), out=out)
        return acc
    return fn


def _sum_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or not present(dout):
        return
    for name in g.in_grad("X"):
        if name is not None:
            g.emit("assign", {"X": dout}, {"Out": [name]})


register(OpSpec("sum", slots("X*"), slots("Out"), _sum_infer, _sum_kernel, _sum_grad,
                aliases=True, layout=LayoutRule(("X", "Out")), sparse_inputs=("X",),
                doc="Out = the sum of the listed inputs; of rows-only inputs, rows only "
                    "(their rows listed one after another); of rows-only and dense, dense"))


def _like_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype, x.kind)


def _zeros_like_kernel(ctx: KernelContext):
    o = ctx.output("Out")
    if o.kind == "tensor_array":
        return lambda x: _NO_ELEMENTS   # every element zero
    if o.kind == SELECTED_ROWS:   # no rows
        none = SelectedRows(ctx.xp.zeros((0,), "int64"),
                            ctx.xp.zeros((0,) + tuple(o.shape[1:]), o.dtype), o.shape[0])
        return lambda x: none
    zeros = ctx.xp.zeros(o.shape, o.dtype)
    return lambda x: zeros


register(OpSpec("fill_zeros_like", slots("X"), slots("Out"), _like_infer, _zeros_like_kernel,
                shape_only=("X",), sparse_inputs=("X",),
                doc="Out = zeros with X's shape and dtype"))


def _assign_kernel(ctx: KernelContext):
    xp = ctx.xp
    if ctx.output("Out").kind in ("tensor_array", SELECTED_ROWS):
        return lambda x: x   # an array value, a rows-only value never changes: no copy
    out = ctx.buffer("Out")
    if out is None:
        return lambda x: xp.array(x, copy=True)
    return lambda x: xp.copyto(out, x) or out


def assign_grad(g: GradContext) -> None:
    """X@GRAD = Out@GRAD: the gradient of an op whose output is its input moved or copied
    (``assign``; ``increment``, whose step is a constant)."""
    dout = g.out_grad("Out")
    if dout and present(dout) and g.wants("X"):
        g.emit("assign", {"X": dout}, {"Out": [n for n in g.in_grad("X") if n]})


register(OpSpec("assign", slots("X"), slots("Out"), _like_infer, _assign_kernel, assign_grad,
                sparse_inputs=("X",), doc="Out = a copy of X"))


def _ones_like_kernel(ctx: KernelContext):
    o = ctx.output("Out")
    ones = ctx.xp.ones(o.shape, o.dtype)
    return lambda x: ones


register(OpSpec("fill_ones_like", slots("X"), slots("Out"), _like_infer, _ones_like_kernel,
                shape_only=("X",), doc="Out = ones with X's shape and dtype"))
