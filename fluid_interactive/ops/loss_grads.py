"""How the loss ops register their gradient ops: one ``<op>_grad`` op per loss, reading a
few forward values and the output's gradient, writing the wanted inputs' gradients."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, grad_slot, infer_like, slots


def grad_maker(grad_type: str, uses: Sequence[str], wrt: Sequence[str],
               out_slot: str) -> Callable[[GradContext], None]:
    """A maker emitting one ``grad_type`` op that reads the forward slots ``uses`` (inputs
    or outputs, optional ones when present) and ``<out_slot>@GRAD``, and writes the
    gradients of the wanted slots among ``wrt``."""
    def grad(g: GradContext) -> None:
        dout = g.flowing(out_slot)
        wanted = [s for s in wrt if g.wants(s)]
        if dout is None or not wanted:
            return
        inputs = {s: g.input(s) or g.output(s) for s in uses}
        inputs[grad_slot(out_slot)] = [dout]
        g.emit(grad_type, inputs, {grad_slot(s): g.in_grad(s) for s in wanted}, g.attrs)
    return grad


def register_grad(grad_type: str, inputs: Sequence[str], like: Mapping[str, str],
                  kernel: Callable[[KernelContext], Any],
                  attrs: Mapping[str, Any] | None = None) -> None:
    """Register a gradient op reading ``inputs`` whose outputs (the keys of ``like``,
    optional when there are several) take the types of the slots ``like`` maps them to."""
    outs = [f"{o}?" if len(like) > 1 else o for o in like]
    register(OpSpec(grad_type, slots(*inputs), slots(*outs), infer_like(dict(like)), kernel,
                    attrs=dict(attrs or {})))


def register_with_grad(op_type: str, inputs: Sequence[str], outputs: Sequence[str],
                       infer: Callable[[InferContext], None],
                       kernel: Callable[[KernelContext], Any],
                       grad_kernel: Callable[[KernelContext], Any], *, uses: Sequence[str],
                       wrt: Sequence[str], out_slot: str,
                       like: Mapping[str, str] | None = None,
                       attrs: Mapping[str, Any] | None = None, doc: str = "",
                       **spec: Any) -> None:
    """Register ``op_type`` and its ``<op_type>_grad``: the gradient op reads the forward
    slots ``uses`` ('?' marks optional ones) and ``<out_slot>@GRAD``, and writes the
    gradients of the slots in ``wrt``, each typed like its slot (or as ``like`` says)."""
    grad_type = f"{op_type}_grad"
    names = [u.rstrip("?") for u in uses]
    register(OpSpec(op_type, slots(*inputs), slots(*outputs), infer, kernel,
                    grad_maker(grad_type, names, wrt, out_slot), attrs=dict(attrs or {}),
                    doc=doc, **spec))
    types = {f"{s}@GRAD": (like or {}).get(s, s) for s in wrt}
    register_grad(grad_type, tuple(uses) + (f"{out_slot}@GRAD",), types, grad_kernel, attrs)
