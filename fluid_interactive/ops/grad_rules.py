"""Gradient ops from a local rule, and the dtype check that the math ops of
`products.py`, `vector_norms.py` and `activation_param.py` share."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..ir.records import FLOAT_DTYPES
from .registry import register
from .spec import OpSpec, emit_default_grad, infer_like, slots

if TYPE_CHECKING:   # annotations only
    from .spec import GradContext, InferContext, KernelContext, TensorType

#: One gradient kernel's local rule: (ctx) -> fn(*inputs of the grad op) -> slot -> grad.
LocalGrads = Callable[["KernelContext"], Callable[..., dict[str, Any]]]


def register_grad(name: str, uses: Sequence[str], wrt: Sequence[str], local: LocalGrads,
                  attrs: dict | None = None) -> Callable[[GradContext], None]:
    """Register ``<name>_grad`` reading the forward slots ``uses`` ('?' marks an optional
    one) and dOut and writing ``S@GRAD`` for the wanted slots of ``wrt``; returns the
    forward op's gradient maker."""
    def kernel(ctx: KernelContext) -> Callable:
        fn = local(ctx)
        wanted = [s for s in wrt if ctx.has_output(s + "@GRAD")]

        def run(*args: Any) -> Any:
            grads = fn(*args)
            picked = tuple(grads[s] for s in wanted)
            return picked[0] if len(picked) == 1 else picked
        return run

    def maker(g: GradContext) -> None:
        emit_default_grad(g, [u.rstrip("?") for u in uses], name + "_grad", wrt)

    register(OpSpec(name + "_grad", slots(*uses, "Out@GRAD"),
                    slots(*(s + "@GRAD?" for s in wrt)),
                    infer_like({s + "@GRAD": s for s in wrt}), kernel, attrs=attrs or {}))
    return maker


def check_same_float(ctx: InferContext, *names: str) -> TensorType:
    """The inputs share one float dtype; returns the first's type."""
    first = ctx.input(names[0])
    for n in names:
        t = ctx.input(n)
        if t.dtype not in FLOAT_DTYPES:
            ctx.fail_dtype(f"{n} must be float16/32/64, got {t.dtype}; cast it first")
        if t.dtype != first.dtype:
            ctx.fail_dtype(f"{names[0]} is {first.dtype} but {n} is {t.dtype}; cast one "
                           f"of them")
    return first
