"""Comparisons: ``less_than``, ``less_equal``, ``greater_than``, ``greater_equal``,
``equal``, ``not_equal``. Out is a bool tensor of the broadcast shape of X and Y (Paddle's
``axis`` rule, as the elementwise ops); X and Y must have the same dtype. No gradient flows
through a comparison: its result is a mask (multiply by ``cast(mask, 'float32')`` to use
it in a differentiable expression)."""
from __future__ import annotations

from .broadcast import infer_binary
from .elementwise import binary_kernel
from .registry import register
from .spec import InferContext, OpSpec, slots


def _infer(ctx: InferContext) -> None:
    ctx.set_output("Out", infer_binary(ctx), "bool")


for _name, _ufunc, _symbol in (("less_than", "less", "<"), ("less_equal", "less_equal", "<="),
                               ("greater_than", "greater", ">"),
                               ("greater_equal", "greater_equal", ">="),
                               ("equal", "equal", "=="), ("not_equal", "not_equal", "!=")):
    register(OpSpec(type=_name, inputs=slots("X", "Y"), outputs=slots("Out"),
                    attrs={"axis": -1}, infer=_infer, kernel=binary_kernel(_ufunc),
                    doc=f"Out = X {_symbol} Y, elementwise, as bool; no gradient"))
