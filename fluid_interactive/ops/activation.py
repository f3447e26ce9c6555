"""Paddle 1.8's further elementwise activations, one table row each (see `unary.py` for
what a row holds): logsigmoid, tanh_shrink, softplus, softsign, softshrink, hard_shrink,
thresholded_relu, relu6, brelu, hard_sigmoid, hard_swish, selu, soft_relu, stanh, mish.

Attrs and defaults are Paddle's. Where Paddle's gradient differs from the derivative of
its forward only at kinks it takes one side; where it differs elsewhere the derivative is
used (noted at the row). Softplus-like forms are computed without overflow:
``softplus(x) = max(x, 0) + log1p(exp(-|x|))``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .spec import ScalarForm
from .unary import clip_one, define_unary


def _softplus(xp: Any, x: Any, o: Any = None) -> Any:
    """log(1 + exp(x)) without overflow (``o`` may be x's own array)."""
    m = xp.maximum(x, 0)
    r = xp.log1p(xp.exp(-xp.abs(x)), out=o)
    return xp.add(r, m, out=r)


def _sigmoid(xp: Any, x: Any) -> Any:
    """1 / (1 + exp(-x)) without overflow."""
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)


def _mask(xp: Any, g: Any, keep: Any, o: Any, factor: float = 1.0) -> Any:
    """g where ``keep``, 0 elsewhere (times ``factor``)."""
    r = xp.multiply(g, keep, out=o)
    return r if factor == 1.0 else xp.multiply(r, factor, out=r)


# --- one element of each op, for the compiled chains (OpSpec.scalar); a clip keeps NaN ---

def _logsigmoid_one(x, zero):
    return -(max(-x, zero) + np.log1p(np.exp(-abs(x))))


def _tanh_shrink_one(x):
    return x - np.tanh(x)


def _softplus_one(x, zero):
    return max(x, zero) + np.log1p(np.exp(-abs(x)))


def _softsign_one(x, one):
    return x / (one + abs(x))


def _stanh_one(x, scale_a, scale_b):
    return np.tanh(x * scale_a) * scale_b


def _selu_one(x, scale, zero, alpha_scale):
    return x * scale if x > zero else np.expm1(x) * alpha_scale


def _soft_relu_one(x, lo, hi):
    return np.log1p(np.exp(hi if x > hi else (lo if x < lo else x)))


def _mish_one(x, zero):
    return x * np.tanh(max(x, zero) + np.log1p(np.exp(-abs(x))))


def _mish_beyond_one(x, zero, threshold):
    return x * np.tanh(x if x > threshold else max(x, zero) + np.log1p(np.exp(-abs(x))))


def _softshrink_one(x, lo, hi):
    return x - (hi if x > hi else (lo if x < lo else x))


def _above_one(x, one, zero, threshold):
    """x where x > threshold, else 0 (as x times the mask)."""
    return x * (one if x > threshold else zero)


def _abs_above_one(x, one, zero, threshold):
    return x * (one if abs(x) > threshold else zero)


def _hard_sigmoid_one(x, slope, offset, zero, one):
    v = x * slope + offset
    return one if v > one else (zero if v < zero else v)


def _hard_swish_one(x, offset, zero, threshold, scale):
    v = x + offset
    return (threshold if v > threshold else (zero if v < zero else v)) * x / scale


def _mish_scalar(a: Mapping[str, Any]) -> ScalarForm:
    if a["threshold"] > 0:
        return ScalarForm(_mish_beyond_one, (0.0, a["threshold"]))
    return ScalarForm(_mish_one, (0.0,))

# --- smooth ones -------------------------------------------------------------------------


def _logsigmoid(xp, x, o, a):
    r = _softplus(xp, -x, o)
    return xp.negative(r, out=r)


define_unary("logsigmoid", _logsigmoid,
             lambda xp, x, y, g, o, a: xp.multiply(g, _sigmoid(xp, -x), out=o), ("X",),
             doc="Out = log(1 / (1 + exp(-X))) = -softplus(-X)",
             scalar=lambda a: ScalarForm(_logsigmoid_one, (0.0,)))
define_unary("tanh_shrink", lambda xp, x, o, a: xp.subtract(x, xp.tanh(x), out=o),
             lambda xp, x, y, g, o, a: xp.multiply(g, xp.square(xp.tanh(x)), out=o), ("X",),
             doc="Out = X - tanh(X)", scalar=lambda a: ScalarForm(_tanh_shrink_one))
define_unary("softplus", lambda xp, x, o, a: _softplus(xp, x, o),
             lambda xp, x, y, g, o, a: xp.multiply(g, _sigmoid(xp, x), out=o), ("X",),
             doc="Out = log(1 + exp(X))",
             scalar=lambda a: ScalarForm(_softplus_one, (0.0,)))
define_unary("softsign", lambda xp, x, o, a: xp.divide(x, 1 + xp.abs(x), out=o),
             lambda xp, x, y, g, o, a: xp.divide(g, xp.square(1 + xp.abs(x)), out=o),
             ("X",), doc="Out = X / (1 + |X|)",
             scalar=lambda a: ScalarForm(_softsign_one, (1.0,)))


def _stanh(xp, x, o, a):
    r = xp.tanh(xp.multiply(x, a["scale_a"], out=o), out=o)
    return xp.multiply(r, a["scale_b"], out=r)


def _stanh_grad(xp, x, y, g, o, a):
    t = xp.tanh(x * a["scale_a"])
    return xp.multiply(g, (1 - t * t) * (a["scale_a"] * a["scale_b"]), out=o)


define_unary("stanh", _stanh, _stanh_grad, ("X",),
             attrs={"scale_a": 0.67, "scale_b": 1.7159},
             doc="Out = scale_b * tanh(scale_a * X)",
             scalar=lambda a: ScalarForm(_stanh_one, (a["scale_a"], a["scale_b"])))


def _selu(xp, x, o, a):
    scale, alpha = a["scale"], a["alpha"]
    neg = xp.expm1(xp.minimum(x, 0)) * (alpha * scale)
    r = xp.multiply(x, scale, out=o)
    return xp.copyto(r, neg, where=x <= 0) or r


def _selu_grad(xp, x, y, g, o, a):
    d = xp.where(y > 0, a["scale"], y + a["scale"] * a["alpha"]).astype(g.dtype, copy=False)
    return xp.multiply(g, d, out=o)


define_unary("selu", _selu, _selu_grad, ("Out",),
             attrs={"scale": 1.0507009873554805, "alpha": 1.6732632423543772},
             doc="Out = scale * X if X > 0 else scale * alpha * (exp(X) - 1)",
             scalar=lambda a: ScalarForm(_selu_one,
                                         (a["scale"], 0.0, a["alpha"] * a["scale"])),
             inplace=False)


def _soft_relu(xp, x, o, a):
    t = a["threshold"]
    r = xp.exp(xp.clip(x, -t, t, out=o), out=o)
    return xp.log1p(r, out=r)


def _soft_relu_grad(xp, x, y, g, o, a):
    # Paddle masks by Out, not X; the derivative of the clipped form is 0 outside (-t, t).
    t = a["threshold"]
    return _mask(xp, g, ((x > -t) & (x < t)) * _sigmoid(xp, x), o)


define_unary("soft_relu", _soft_relu, _soft_relu_grad, ("X",), attrs={"threshold": 40.0},
             doc="Out = log(1 + exp(min(max(X, -threshold), threshold)))",
             scalar=lambda a: ScalarForm(_soft_relu_one, (-a["threshold"], a["threshold"])))


def _mish_softplus(xp, x, threshold):
    sp = _softplus(xp, x)
    return sp if threshold <= 0 else xp.where(x > threshold, x, sp)


def _mish(xp, x, o, a):
    return xp.multiply(x, xp.tanh(_mish_softplus(xp, x, a["threshold"])), out=o)


def _mish_grad(xp, x, y, g, o, a):
    sp = _mish_softplus(xp, x, a["threshold"])
    t = xp.tanh(sp)
    d = x * ((1 - t * t) * -xp.expm1(-sp)) + t
    return xp.multiply(g, d, out=o)


define_unary("mish", _mish, _mish_grad, ("X",), attrs={"threshold": 20.0},
             doc="Out = X * tanh(softplus(X)); softplus(X) is X beyond threshold (> 0)",
             scalar=_mish_scalar)

# --- piecewise linear ones ---------------------------------------------------------------


def _softshrink(xp, x, o, a):
    lam = a["lambda"]
    return xp.subtract(x, xp.clip(x, -lam, lam), out=o)


define_unary("softshrink", _softshrink,
             lambda xp, x, y, g, o, a: _mask(xp, g, xp.abs(x) > a["lambda"], o), ("X",),
             attrs={"lambda": 0.5},
             doc="Out = X - lambda if X > lambda, X + lambda if X < -lambda, else 0",
             scalar=lambda a: ScalarForm(_softshrink_one, (-a["lambda"], a["lambda"])))
define_unary("hard_shrink",
             lambda xp, x, o, a: xp.multiply(x, xp.abs(x) > a["threshold"], out=o),
             lambda xp, x, y, g, o, a: _mask(xp, g, xp.abs(x) > a["threshold"], o), ("X",),
             attrs={"threshold": 0.5}, doc="Out = X if |X| > threshold, else 0",
             scalar=lambda a: ScalarForm(_abs_above_one, (1.0, 0.0, a["threshold"])))
define_unary("thresholded_relu",
             lambda xp, x, o, a: xp.multiply(x, x > a["threshold"], out=o),
             lambda xp, x, y, g, o, a: _mask(xp, g, x > a["threshold"], o), ("X",),
             attrs={"threshold": 1.0}, doc="Out = X if X > threshold, else 0",
             scalar=lambda a: ScalarForm(_above_one, (1.0, 0.0, a["threshold"])))
define_unary("relu6", lambda xp, x, o, a: xp.clip(x, 0.0, a["threshold"], out=o),
             lambda xp, x, y, g, o, a: _mask(xp, g, (y > 0) & (y < a["threshold"]), o),
             ("Out",), attrs={"threshold": 6.0}, doc="Out = min(max(X, 0), threshold)",
             scalar=lambda a: ScalarForm(clip_one, (0.0, a["threshold"])))
define_unary("brelu", lambda xp, x, o, a: xp.clip(x, a["t_min"], a["t_max"], out=o),
             lambda xp, x, y, g, o, a: _mask(xp, g, (x > a["t_min"]) & (x < a["t_max"]), o),
             ("X",), attrs={"t_min": 0.0, "t_max": 24.0},
             doc="Out = min(max(X, t_min), t_max)",
             scalar=lambda a: ScalarForm(clip_one, (a["t_min"], a["t_max"])))


def _hard_sigmoid(xp, x, o, a):
    r = xp.multiply(x, a["slope"], out=o)
    r += a["offset"]
    return xp.clip(r, 0.0, 1.0, out=r)


define_unary("hard_sigmoid", _hard_sigmoid,
             lambda xp, x, y, g, o, a: _mask(xp, g, (y > 0) & (y < 1), o, a["slope"]),
             ("Out",), attrs={"slope": 0.2, "offset": 0.5},
             doc="Out = min(max(slope * X + offset, 0), 1)",
             scalar=lambda a: ScalarForm(_hard_sigmoid_one,
                                         (a["slope"], a["offset"], 0.0, 1.0)))


def _hard_swish(xp, x, o, a):
    gate = xp.clip(x + a["offset"], 0.0, a["threshold"])
    r = xp.multiply(gate, x, out=o)
    return xp.divide(r, a["scale"], out=r)


def _hard_swish_grad(xp, x, y, g, o, a):
    # Paddle's gradient is 1 beyond the threshold, threshold / scale by the derivative;
    # the two agree for the default attrs.
    t, s = x + a["offset"], a["scale"]
    d = xp.where(t >= a["threshold"], a["threshold"] / s, (2 * x + a["offset"]) / s)
    return xp.multiply(g, xp.where(t > 0, d, 0.0).astype(g.dtype, copy=False), out=o)


define_unary("hard_swish", _hard_swish, _hard_swish_grad, ("X",),
             attrs={"threshold": 6.0, "scale": 6.0, "offset": 3.0},
             doc="Out = X * min(max(X + offset, 0), threshold) / scale",
             scalar=lambda a: ScalarForm(_hard_swish_one,
                                         (a["offset"], 0.0, a["threshold"], a["scale"])))
