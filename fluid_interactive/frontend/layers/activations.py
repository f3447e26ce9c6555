"""Activation layers: one op each, also reachable through ``act=`` on fc and friends."""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

from ...errors import OpArgumentError
from ...ir.text import short_type
from ..initializer import Constant
from ..param_attr import ParamAttr
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable, float_input
from .unary import unary


def relu(x: Variable, name: str | None = None) -> Variable:
    """max(x, 0), elementwise."""
    return append_simple("relu", {"X": x}, name=name)


def sigmoid(x: Variable, name: str | None = None) -> Variable:
    """1 / (1 + exp(-x)), elementwise."""
    return append_simple("sigmoid", {"X": x}, name=name)


def tanh(x: Variable, name: str | None = None) -> Variable:
    """tanh(x), elementwise."""
    return append_simple("tanh", {"X": x}, name=name)


def leaky_relu(x: Variable, alpha: float = 0.02, name: str | None = None) -> Variable:
    """x where x > 0, else alpha * x."""
    return append_simple("leaky_relu", {"X": x}, {"alpha": float(alpha)}, name=name)


def exp(x: Variable, name: str | None = None) -> Variable:
    """exp(x), elementwise."""
    return append_simple("exp", {"X": x}, name=name)


def log(x: Variable, name: str | None = None) -> Variable:
    """Natural log of x, elementwise."""
    return append_simple("log", {"X": x}, name=name)


def sqrt(x: Variable, name: str | None = None) -> Variable:
    """Square root of x, elementwise."""
    return append_simple("sqrt", {"X": x}, name=name)


def square(x: Variable, name: str | None = None) -> Variable:
    """x * x, elementwise."""
    return append_simple("square", {"X": x}, name=name)


def abs(x: Variable, name: str | None = None) -> Variable:
    return append_simple("abs", {"X": x}, name=name)


def softmax(input: Variable, use_cudnn: bool = False, name: str | None = None,
            axis: int = -1) -> Variable:
    """exp(input) / sum(exp(input)) along ``axis`` (the last by default), computed stably.
    ``use_cudnn`` is accepted for Paddle compatibility and changes nothing."""
    return append_simple("softmax", {"X": float_input(input, "softmax: input")},
                         {"axis": _int(axis, "softmax", "axis")}, name=name)


def log_softmax(input: Variable, axis: int | None = None, dtype: Any = None,
                name: str | None = None) -> Variable:
    """input - log(sum(exp(input))) along ``axis`` (None: the last), computed stably: the
    log of `softmax` without its rounding to 0 for very unlikely classes. With ``dtype``
    the input is cast to it first."""
    x = as_variable(input, "log_softmax: input")
    if dtype is not None:
        from .tensor import cast
        x = cast(x, dtype)
    axis = -1 if axis is None else _int(axis, "log_softmax", "axis")
    return append_simple("log_softmax", {"X": float_input(x, "log_softmax: input")},
                         {"axis": axis}, name=name)


def _int(value: Any, layer: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int, got "
                                        f"{type(value).__name__} {value!r:.40}")
    return int(value)


def relu6(x: Variable, threshold: float = 6.0, name: str | None = None) -> Variable:
    """min(max(x, 0), threshold)."""
    return unary("relu6", x, name, threshold=threshold)


def hard_sigmoid(x: Variable, slope: float = 0.2, offset: float = 0.5,
                 name: str | None = None) -> Variable:
    """min(max(slope * x + offset, 0), 1): a piecewise linear sigmoid."""
    return unary("hard_sigmoid", x, name, slope=slope, offset=offset)


def hard_swish(x: Variable, threshold: float = 6.0, scale: float = 6.0, offset: float = 3.0,
               name: str | None = None) -> Variable:
    """x * min(max(x + offset, 0), threshold) / scale."""
    return unary("hard_swish", x, name, threshold=threshold, scale=scale, offset=offset)


def selu(x: Variable, scale: float | None = None, alpha: float | None = None,
         name: str | None = None) -> Variable:
    """scale * x for x > 0, scale * alpha * (exp(x) - 1) otherwise; scale and alpha default
    to the self-normalising constants 1.0507... and 1.6732...."""
    return unary("selu", x, name, scale=scale, alpha=alpha)


def brelu(x: Variable, t_min: float = 0.0, t_max: float = 24.0,
          name: str | None = None) -> Variable:
    """min(max(x, t_min), t_max): a bounded relu."""
    if isinstance(t_min, Real) and isinstance(t_max, Real) and not t_min < t_max:
        raise error_at(OpArgumentError, f"brelu: t_min ({t_min}) must be below t_max "
                                        f"({t_max})")
    return unary("brelu", x, name, t_min=t_min, t_max=t_max)


def soft_relu(x: Variable, threshold: float = 40.0, name: str | None = None) -> Variable:
    """log(1 + exp(min(max(x, -threshold), threshold)))."""
    return unary("soft_relu", x, name, threshold=threshold)


def stanh(x: Variable, scale_a: float = 0.67, scale_b: float = 1.7159,
          name: str | None = None) -> Variable:
    """scale_b * tanh(scale_a * x)."""
    return unary("stanh", x, name, scale_a=scale_a, scale_b=scale_b)


def mish(x: Variable, threshold: float = 20, name: str | None = None) -> Variable:
    """x * tanh(softplus(x)); beyond ``threshold`` (> 0) softplus(x) is taken as x."""
    if not isinstance(threshold, Real) or isinstance(threshold, bool) or threshold <= 0:
        raise error_at(OpArgumentError, f"mish: threshold must be a number > 0, got "
                                        f"{threshold!r:.40}")
    return unary("mish", x, name, threshold=threshold)


_PRELU_MODES = ("all", "channel", "element")


def prelu(x: Variable, mode: str, param_attr: Any = None, name: str | None = None
          ) -> Variable:
    """x where x > 0, else alpha * x, with a learnt alpha (initialised to 0.25): one for
    ``mode='all'``, one per channel (dim 1 of an NCHW input) for 'channel', one per element
    of a sample for 'element'."""
    x = float_input(x, "prelu: x")
    if mode not in _PRELU_MODES:
        raise error_at(OpArgumentError, f"prelu: mode must be one of "
                                        f"{', '.join(map(repr, _PRELU_MODES))}, got {mode!r}")
    rank = len(x.shape)
    if rank < (2 if mode == "channel" else 1):
        raise error_at(OpArgumentError, f"prelu: mode {mode!r} needs x of rank >= "
                                        f"{2 if mode == 'channel' else 1}, got "
                                        f"{x.name}:{short_type(x.desc)}")
    shape = {"all": [1], "channel": [1, x.shape[1], 1, 1],
             "element": [1, *x.shape[1:]]}[mode]
    helper = LayerHelper("prelu", name)
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    alpha = helper.create_parameter(helper.param_attr(param_attr, "param_attr") or ParamAttr(),
                                    shape, x.dtype, default_initializer=Constant(0.25))
    return helper.append_one("prelu", {"X": x, "Alpha": alpha}, {"mode": mode})


def maxout(x: Variable, groups: int, name: str | None = None, axis: int = 1) -> Variable:
    """The maximum over each run of ``groups`` consecutive channels of an image: [N, C,
    H, W] -> [N, C / groups, H, W] with ``axis=1`` (NCHW); ``axis=3`` or -1 for NHWC."""
    x = float_input(x, "maxout: x")
    if axis not in (1, -1, 3):
        raise error_at(OpArgumentError, f"maxout: axis must be 1 (NCHW), or 3 or -1 (NHWC), "
                                        f"got {axis!r}")
    groups = _int(groups, "maxout", "groups")
    axis = 3 if axis == -1 else axis
    if len(x.shape) != 4 or groups < 1 or (x.shape[axis] > 0 and x.shape[axis] % groups):
        raise error_at(OpArgumentError, f"maxout: x {x.name}:{short_type(x.desc)} must be a "
                                        f"4-D image whose {axis=} dim splits into groups of "
                                        f"{groups}")
    return append_simple("maxout", {"X": x}, {"groups": groups, "axis": axis}, name=name)


__all__ = ['relu', 'sigmoid', 'tanh', 'leaky_relu', 'exp', 'log', 'sqrt', 'square', 'abs',
           'softmax', 'log_softmax', 'relu6', 'hard_sigmoid', 'hard_swish', 'selu', 'brelu',
           'soft_relu', 'stanh', 'mish', 'prelu', 'maxout']
