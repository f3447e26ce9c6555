"""Binary elementwise ops with Paddle's ``axis`` broadcasting, and their gradients."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..backend.rows import pointwise, pointwise_fits
from .broadcast import aligned_y_shape, infer_binary, make_unbroadcast
from .layouts import LayoutRule, adapt_broadcast_axis
from .registry import register
from .spec import (
    Forward,
    GradContext,
    KernelContext,
    OpSpec,
    ScalarForm,
    infer_like,
    present,
    slots,
)

_ATTRS = {"axis": -1}


def binary_kernel(ufunc_name: str) -> Callable[[KernelContext], Callable]:
    """The kernel factory of a binary op computing ``xp.<ufunc_name>(X, Y)`` with Paddle's
    ``axis`` broadcasting (the elementwise and comparison ops)."""
    def kernel(ctx: KernelContext) -> Callable:
        ufunc = getattr(ctx.xp, ufunc_name)
        out = ctx.buffer("Out")
        x, y = ctx.input("X"), ctx.input("Y")
        aligned = aligned_y_shape(x.shape, y.shape, ctx.attrs["axis"])
        if pointwise_fits(ctx.xp, out, [x.shape]):   # Y cut alike or broadcast whole
            rows = pointwise(lambda a, b, o: ufunc(a, b, out=o), out)
            if aligned is None or aligned == y.shape:
                return rows
            return lambda a, b: rows(a, b.reshape(aligned))
        if aligned is None or aligned == y.shape:
            return lambda a, b: ufunc(a, b, out=out)
        return lambda a, b: ufunc(a, b.reshape(aligned), out=out)
    return kernel


def _grad_kernel(local_grads: Callable, identity_x: bool = False):
    """Build a grad kernel from ``local_grads(xp, x, y, out, dout, want_x, want_y)``
    computing full-shape (broadcast) gradients; they are then summed down to X's and Y's
    shapes. ``identity_x``: dX is dOut itself (add, sub), so when only dX is wanted and no
    reduction is needed the op becomes a plain alias."""
    def kernel(ctx: KernelContext):
        xp = ctx.xp
        x, y = ctx.input("X"), ctx.input("Y")
        dout = ctx.input("Out@GRAD")
        aligned = aligned_y_shape(x.shape, y.shape, ctx.attrs["axis"])
        want_x, want_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")
        if identity_x and want_x and not want_y and dout.shape == x.shape:
            return Forward(len(ctx.in_types) - 1)
        to_x = make_unbroadcast(xp, dout.shape, x.shape, None, ctx.buffer("X@GRAD"), x.dtype)
        to_y = make_unbroadcast(xp, dout.shape, y.shape, aligned, ctx.buffer("Y@GRAD"), y.dtype)
        yv = (lambda a: a) if aligned is None else (lambda a: a.reshape(aligned))
        def with_out(a, b, out, g):
            return local_grads(xp, a, yv(b), out, g, want_x, want_y)

        def without_out(a, b, g):
            return local_grads(xp, a, yv(b), None, g, want_x, want_y)
        grads: Callable = with_out if ctx.has_input("Out") else without_out
        if want_x and want_y:
            def both(*args):
                gx, gy = grads(*args)
                return to_x(gx), to_y(gy)
            return both
        if want_x:
            return lambda *args: to_x(grads(*args)[0])
        return lambda *args: to_y(grads(*args)[1])
    return kernel


def _grad_maker(grad_type: str, uses_out: bool = False):
    def grad(g: GradContext) -> None:
        dout = g.out_grad("Out")
        if not dout or not present(dout) or not (g.wants("X") or g.wants("Y")):
            return
        inputs: dict[str, Sequence[str | None]] = {
            "X": g.input("X"), "Y": g.input("Y"), "Out@GRAD": dout}
        if uses_out:
            inputs["Out"] = g.output("Out")
        outputs = {"X@GRAD": [n for n in g.in_grad("X") if n],
                   "Y@GRAD": [n for n in g.in_grad("Y") if n]}
        g.emit(grad_type, inputs, outputs, g.attrs)
    return grad


def _infer(ctx) -> None:
    infer_binary(ctx)


def _define(name: str, ufunc: str, local_grads: Callable | None, uses_out: bool = False,
            doc: str = "", identity_x: bool = False, scalar: Callable | None = None,
            rows_values: bool = False) -> None:
    """``identity_x``: dX is dOut (add, sub), and the gradient reads X and Y for their
    shapes alone. ``scalar``: the op on one element pair, ``fn(x, y)`` (a module-level
    function: `OpSpec.scalar`). ``local_grads`` None: no gradient."""
    register(OpSpec(type=name, inputs=slots("X", "Y"), outputs=slots("Out"), attrs=_ATTRS,
                    infer=_infer, kernel=binary_kernel(ufunc),
                    grad=None if local_grads is None else _grad_maker(name + "_grad", uses_out),
                    doc=doc,
                    inplace=(("Out", "X"), ("Out", "Y")),
                    scalar=None if scalar is None else (lambda a: ScalarForm(scalar)),
                    layout=LayoutRule(("X", "Y", "Out"), adapt=adapt_broadcast_axis),
                    rows_values=rows_values))
    if local_grads is None:
        return
    grad_inputs = ("X", "Y", "Out?", "Out@GRAD") if uses_out else ("X", "Y", "Out@GRAD")
    register(OpSpec(type=name + "_grad", inputs=slots(*grad_inputs),
                    outputs=slots("X@GRAD?", "Y@GRAD?"), attrs=_ATTRS,
                    infer=infer_like({"X@GRAD": "X", "Y@GRAD": "Y"}),
                    kernel=_grad_kernel(local_grads, identity_x), aliases=True,
                    shape_only=("X", "Y") if identity_x else (),
                    layout=LayoutRule(("X", "Y", "Out", "Out@GRAD", "X@GRAD", "Y@GRAD"),
                                      adapt=adapt_broadcast_axis)))


# Local gradients, before summing over broadcast axes. ``g`` is dOut.
def _add_grads(xp, x, y, out, g, wx, wy):
    return g, g


def _sub_grads(xp, x, y, out, g, wx, wy):
    return g, (xp.negative(g) if wy else None)


def _mul_grads(xp, x, y, out, g, wx, wy):
    return (g * y if wx else None), (g * x if wy else None)


def _div_grads(xp, x, y, out, g, wx, wy):
    gx = g / y
    return (gx if wx else None), (xp.negative(gx * out) if wy else None)


def _max_grads(xp, x, y, out, g, wx, wy):
    mask = x > y
    return (g * mask if wx else None), (g * ~mask if wy else None)


def _min_grads(xp, x, y, out, g, wx, wy):
    mask = x < y
    return (g * mask if wx else None), (g * ~mask if wy else None)


def _pow_grads(xp, x, y, out, g, wx, wy):
    gx = g * y * xp.power(x, y - 1) if wx else None
    gy = g * out * xp.log(xp.where(x > 0, x, 1)) if wy else None
    return gx, gy


# --- one element pair of each op, for the compiled chains (OpSpec.scalar) ----------------

def _add_one(x, y):
    return x + y


def _sub_one(x, y):
    return x - y


def _mul_one(x, y):
    return x * y


def _div_one(x, y):
    return x / y


def _floordiv_one(x, y):
    return x // y


_define("elementwise_add", "add", _add_grads, doc="Out = X + Y", identity_x=True,
        scalar=_add_one)
_define("elementwise_sub", "subtract", _sub_grads, doc="Out = X - Y", identity_x=True,
        scalar=_sub_one)
_define("elementwise_mul", "multiply", _mul_grads, scalar=_mul_one, rows_values=True,
        doc="Out = X * Y. A rows-only X (Y one number: a gradient clip's scale): its rows "
            "times Y, rows-only")
_define("elementwise_div", "divide", _div_grads, uses_out=True, doc="Out = X / Y", scalar=_div_one)
_define("elementwise_max", "maximum", _max_grads, doc="Out = max(X, Y); ties send the "
        "gradient to Y")
_define("elementwise_min", "minimum", _min_grads, doc="Out = min(X, Y); ties send the "
        "gradient to Y")
_define("elementwise_pow", "power", _pow_grads, uses_out=True, doc="Out = X ** Y")


def _mod_grads(xp, x, y, out, g, wx, wy):
    # X - floor(X / Y) * Y: the derivative is 1 for X and -floor(X / Y) for Y
    return (g if wx else None), (xp.negative(g * xp.floor_divide(x, y)) if wy else None)


_define("elementwise_mod", "remainder", _mod_grads,
        doc="Out = X mod Y, with the sign of Y (as Python's % and NumPy's remainder)")

_define("elementwise_floordiv", "floor_divide", None,
        doc="Out = floor(X / Y) (Python's //; no gradient)", scalar=_floordiv_one)
