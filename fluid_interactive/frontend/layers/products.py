"""Products and similarities with Paddle 1.8's signatures: ``dot``, ``bmm``, ``addmm``,
``addcmul``, ``cross``, ``dist``, ``cos_sim``, ``l2_normalize``,
``bilinear_tensor_product`` and ``fsp_matrix``."""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

from ...errors import OpArgumentError
from ...ir.text import short_type
from ..param_attr import ParamAttr
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable, float_input
from .math import elementwise_add, elementwise_mul, scale
from .targets import written_to


def _number(value: Any, layer: str, what: str) -> float:
    if not isinstance(value, Real) or isinstance(value, bool):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a number, got "
                                        f"{type(value).__name__} {value!r:.40}")
    return float(value)


def dot(x: Variable, y: Variable, name: str | None = None) -> Variable:
    """The inner product of ``x`` and ``y`` (one shape, 1-D [N] or 2-D [B, N]) over their
    last dim, kept with size 1: [1] or [B, 1]."""
    return append_simple("dot", {"X": as_variable(x, "dot: x"), "Y": as_variable(y, "dot: y")},
                         name=name)


def bmm(x: Variable, y: Variable, name: str | None = None) -> Variable:
    """The batched matrix product of 3-D ``x`` [B, M, K] and ``y`` [B, K, N]: [B, M, N]."""
    return append_simple("bmm", {"X": float_input(x, "bmm: x"), "Y": float_input(y, "bmm: y")},
                         name=name)


def addmm(input: Variable, x: Variable, y: Variable, alpha: float = 1.0, beta: float = 1.0,
          name: str | None = None) -> Variable:
    """``beta * input + alpha * x @ y`` for matrices ``x`` [M, K] and ``y`` [K, N];
    ``input`` is [M, N], or broadcasts from [1, N], [M, 1] or [1, 1]."""
    inputs = {"Input": float_input(input, "addmm: input"), "X": float_input(x, "addmm: x"),
              "Y": float_input(y, "addmm: y")}
    return append_simple("addmm", inputs, {"Alpha": _number(alpha, "addmm", "alpha"),
                                           "Beta": _number(beta, "addmm", "beta")}, name=name)


def addcmul(input: Variable, tensor1: Variable, tensor2: Variable, value: float = 1.0,
            out: Variable | None = None, name: str | None = None) -> Variable:
    """``input + value * tensor1 * tensor2``, elementwise (broadcast as in
    `elementwise_add`)."""
    inputs = [as_variable(v, f"addcmul: {w}") for v, w in
              ((input, "input"), (tensor1, "tensor1"), (tensor2, "tensor2"))]
    product = scale(elementwise_mul(inputs[1], inputs[2]),
                    scale=_number(value, "addcmul", "value"))
    return written_to(elementwise_add(inputs[0], product, name=name), out, "addcmul")


def cross(input: Variable, other: Variable, dim: int | None = None) -> Variable:
    """The cross product of 3-vectors along ``dim`` (None: the first dim of size 3) of
    ``input`` and ``other``, of one shape."""
    attrs: dict[str, int] = {}
    if dim is not None:
        if isinstance(dim, bool) or not isinstance(dim, Integral):
            raise error_at(OpArgumentError, f"cross: dim must be an int, got {dim!r:.40}")
        attrs["dim"] = int(dim)
    return append_simple("cross", {"X": float_input(input, "cross: input"),
                                   "Y": float_input(other, "cross: other")}, attrs)


def dist(x: Variable, y: Variable, p: float = 2) -> Variable:
    """The p-norm of ``x - y`` (broadcast), shape [1]: p = 0 counts the non-zero
    differences, ``float('inf')`` / ``-inf`` take the largest / smallest |x - y|."""
    return append_simple("dist", {"X": float_input(x, "dist: x"), "Y": float_input(y, "dist: y")},
                         {"p": _number(p, "dist", "p")})


def cos_sim(X: Variable, Y: Variable) -> Variable:
    """The cosine similarity of each row of ``X`` [N, ...] with the same row of ``Y``
    (or with Y's only row when Y is [1, ...]): [N, 1]."""
    helper = LayerHelper("cos_sim")
    outs = helper.append("cos_sim", {"X": float_input(X, "cos_sim: X"),
                                     "Y": float_input(Y, "cos_sim: Y")})
    return outs["Out"][0]


def l2_normalize(x: Variable, axis: int, epsilon: float = 1e-12,
                 name: str | None = None) -> Variable:
    """``x / sqrt(sum(x^2 along axis) + epsilon)``; for a 1-D ``x`` the axis is 0."""
    x = float_input(x, "l2_normalize: x")
    if len(x.shape) == 1:
        axis = 0
    if isinstance(axis, bool) or not isinstance(axis, Integral) or \
            not -len(x.shape) <= axis < len(x.shape):
        raise error_at(OpArgumentError, f"l2_normalize: axis must be an int that fits x "
                                        f"{x.name}:{short_type(x.desc)}, got {axis!r:.40}")
    helper = LayerHelper("l2_normalize", name)
    outs = helper.append("norm", {"X": x}, {"axis": int(axis),
                                            "epsilon": _number(epsilon, "l2_normalize",
                                                               "epsilon")})
    return outs["Out"][0]


def bilinear_tensor_product(x: Variable, y: Variable, size: int, act: str | None = None,
                            name: str | None = None, param_attr: Any = None,
                            bias_attr: Any = None) -> Variable:
    """``out[b, k] = x[b] @ W[k] @ y[b] + bias[k]`` for ``x`` [B, M], ``y`` [B, N]: a
    learnt weight W [size, M, N] and bias [1, size] (``bias_attr=False``: none), then
    ``act``."""
    x, y = float_input(x, "bilinear_tensor_product: x"), float_input(y, "bilinear_tensor_"
                                                                       "product: y")
    if isinstance(size, bool) or not isinstance(size, Integral) or size < 1:
        raise error_at(OpArgumentError, f"bilinear_tensor_product: size must be a positive "
                                        f"int, got {size!r:.40}")
    if len(x.shape) != 2 or len(y.shape) != 2:
        raise error_at(OpArgumentError, f"bilinear_tensor_product: x and y must be 2-D "
                                        f"[batch, dim], got {x.name}:{short_type(x.desc)} and "
                                        f"{y.name}:{short_type(y.desc)}")
    helper = LayerHelper("bilinear_tensor_product", name)
    helper.context = f" (inputs {x.name}:{short_type(x.desc)}, {y.name}:{short_type(y.desc)})"
    w = helper.create_parameter(helper.param_attr(param_attr, "param_attr") or ParamAttr(),
                                [int(size), x.shape[1], y.shape[1]], x.dtype)
    inputs = {"X": x, "Y": y, "Weight": w}
    b_attr = helper.param_attr(bias_attr, "bias_attr")
    if b_attr is not None:
        inputs["Bias"] = helper.create_parameter(b_attr, [1, int(size)], x.dtype, is_bias=True)
    out = helper.append_one("bilinear_tensor_product", inputs, final=act is None)
    return helper.activation(out, act)


def fsp_matrix(x: Variable, y: Variable) -> Variable:
    """The flow-of-solution-procedure matrix of two feature maps ``x`` [N, C1, H, W] and
    ``y`` [N, C2, H, W]: ``x[n] @ y[n]^T / (H * W)``, [N, C1, C2]."""
    return append_simple("fsp", {"X": float_input(x, "fsp_matrix: x"),
                                 "Y": float_input(y, "fsp_matrix: y")}, layer="fsp_matrix")


__all__ = ["dot", "bmm", "addmm", "addcmul", "cross", "dist", "cos_sim", "l2_normalize",
           "bilinear_tensor_product", "fsp_matrix"]
