"""Comparisons: ``less_than``, ``less_equal``, ``greater_than``, ``greater_equal``,
``equal``, ``not_equal``. Out is a bool tensor of the broadcast shape of X and Y (Paddle's
``axis`` rule, as the elementwise ops); X and Y must have the same dtype. No gradient flows
through a comparison: its result is a mask (multiply by ``cast(mask, 'float32')`` to use
it in a differentiable expression)."""
from __future__ import annotations

from .broadcast import infer_binary
from .elementwise import binary_kernel
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots


def _infer(ctx: InferContext) -> None:
    ctx.set_output("Out", infer_binary(ctx), "bool")


for _name, _ufunc, _symbol in (("less_than", "less", "<"), ("less_equal", "less_equal", "<="),
                               ("greater_than", "greater", ">"),
                               ("greater_equal", "greater_equal", ">="),
                               ("equal", "equal", "=="), ("not_equal", "not_equal", "!=")):
    register(OpSpec(type=_name, inputs=slots("X", "Y"), outputs=slots("Out"),
                    attrs={"axis": -1}, infer=_infer, kernel=binary_kernel(_ufunc),
                    doc=f"Out = X {_symbol} Y, elementwise, as bool; no gradient"))


# --- logical ops: bool in, bool out (Switch builds its case conditions with them) -----------

def _logical_infer(ctx: InferContext) -> None:
    for slot in ("X", "Y"):
        if ctx.has_input(slot) and ctx.input(slot).dtype != "bool":
            ctx.fail_dtype(f"{slot} must be bool, got {ctx.input(slot).dtype}; compare first "
                           f"(fluid.layers.less_than, ...) or cast to bool")
    if ctx.has_input("Y"):
        ctx.set_output("Out", infer_binary(ctx), "bool")
    else:
        x = ctx.input("X")
        ctx.set_output("Out", x.shape, "bool")


def _logical_not_kernel(ctx: KernelContext):
    xp, out = ctx.xp, ctx.buffer("Out")
    return lambda x: xp.logical_not(x, out=out)


register(OpSpec("logical_not", slots("X"), slots("Out"), _logical_infer, _logical_not_kernel,
                doc="Out = not X, elementwise (bool)"))
for _name, _symbol in (("logical_and", "and"), ("logical_or", "or"), ("logical_xor", "xor")):
    register(OpSpec(_name, slots("X", "Y"), slots("Out"), _logical_infer,
                    binary_kernel(_name), attrs={"axis": -1},
                    doc=f"Out = X {_symbol} Y, elementwise (bool)"))
