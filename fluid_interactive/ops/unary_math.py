"""Paddle 1.8's elementwise math functions, one table row each (see `unary.py`): sin,
cos, atan, asin, acos, ceil, floor, round, reciprocal, rsqrt, log1p and erf.

ceil, floor and round pass a zero gradient, as Paddle's do (not none: a loss reached only
through them still gets its gradients, all zero). ``round`` rounds halves away from zero
(C's ``round``, which Paddle's kernel calls), not to even as NumPy's ``round`` does.
"""
from __future__ import annotations

import numpy as np

from .spec import ScalarForm
from .special import TWO_OVER_SQRT_PI, erf
from .unary import define_unary

# --- one element of each op, for the compiled chains (OpSpec.scalar) ---------------------


def _sin_one(x):
    return np.sin(x)


def _cos_one(x):
    return np.cos(x)


def _atan_one(x):
    return np.arctan(x)


def _asin_one(x):
    return np.arcsin(x)


def _acos_one(x):
    return np.arccos(x)


def _ceil_one(x):
    return np.ceil(x)


def _floor_one(x):
    return np.floor(x)


def _round_one(x, one, half, zero):
    """Halves away from zero, as C's round."""
    return np.trunc(x) + np.copysign(one if abs(x - np.trunc(x)) >= half else zero, x)


def _reciprocal_one(x, one):
    return one / x


def _rsqrt_one(x, one):
    return one / np.sqrt(x)


def _log1p_one(x):
    return np.log1p(x)


def _zero_grad(xp, x, y, g, o, a):
    return xp.multiply(g, 0.0, out=o)


define_unary("sin", lambda xp, x, o, a: xp.sin(x, out=o),
             lambda xp, x, y, g, o, a: xp.multiply(g, xp.cos(x), out=o), ("X",),
             doc="Out = sin(X)", scalar=lambda a: ScalarForm(_sin_one))
define_unary("cos", lambda xp, x, o, a: xp.cos(x, out=o),
             lambda xp, x, y, g, o, a: xp.multiply(g, -xp.sin(x), out=o), ("X",),
             doc="Out = cos(X)", scalar=lambda a: ScalarForm(_cos_one))
define_unary("atan", lambda xp, x, o, a: xp.arctan(x, out=o),
             lambda xp, x, y, g, o, a: xp.divide(g, 1 + x * x, out=o), ("X",),
             doc="Out = arctan(X)", scalar=lambda a: ScalarForm(_atan_one))
define_unary("asin", lambda xp, x, o, a: xp.arcsin(x, out=o),
             lambda xp, x, y, g, o, a: xp.divide(g, xp.sqrt(1 - x * x), out=o), ("X",),
             doc="Out = arcsin(X)", scalar=lambda a: ScalarForm(_asin_one))
define_unary("acos", lambda xp, x, o, a: xp.arccos(x, out=o),
             lambda xp, x, y, g, o, a: xp.divide(-g, xp.sqrt(1 - x * x), out=o), ("X",),
             doc="Out = arccos(X)", scalar=lambda a: ScalarForm(_acos_one))
define_unary("ceil", lambda xp, x, o, a: xp.ceil(x, out=o), _zero_grad, (),
             doc="Out = the least integer >= X (a zero gradient)",
             scalar=lambda a: ScalarForm(_ceil_one))
define_unary("floor", lambda xp, x, o, a: xp.floor(x, out=o), _zero_grad, (),
             doc="Out = the greatest integer <= X (a zero gradient)",
             scalar=lambda a: ScalarForm(_floor_one))


def _round(xp, x, o, a):
    t = xp.trunc(x)
    d = xp.subtract(x, t)                          # exact; NaN at an infinity
    xp.abs(d, out=d)
    xp.copysign(xp.greater_equal(d, 0.5), x, out=d)   # 1 away from zero at a half or more
    return xp.add(t, d, out=o)


define_unary("round", _round, _zero_grad, (),
             doc="Out = X rounded to the nearest integer, halves away from zero (a zero "
                 "gradient)",
             scalar=lambda a: ScalarForm(_round_one, (1.0, 0.5, 0.0)))
define_unary("reciprocal", lambda xp, x, o, a: xp.divide(1, x, out=o),
             lambda xp, x, y, g, o, a: xp.multiply(g, -(y * y), out=o), ("Out",),
             doc="Out = 1 / X", scalar=lambda a: ScalarForm(_reciprocal_one, (1.0,)))


def _rsqrt(xp, x, o, a):
    r = xp.sqrt(x, out=o)
    return xp.divide(1, r, out=r)


define_unary("rsqrt", _rsqrt,
             lambda xp, x, y, g, o, a: xp.multiply(g, -0.5 * y * y * y, out=o), ("Out",),
             doc="Out = 1 / sqrt(X)", scalar=lambda a: ScalarForm(_rsqrt_one, (1.0,)))
define_unary("log1p", lambda xp, x, o, a: xp.log1p(x, out=o),
             lambda xp, x, y, g, o, a: xp.divide(g, 1 + x, out=o), ("X",),
             doc="Out = ln(1 + X)", scalar=lambda a: ScalarForm(_log1p_one))


def _erf(xp, x, o, a):
    r = erf(xp, x)
    if o is None:
        return r
    xp.copyto(o, r)
    return o


define_unary("erf", _erf,
             lambda xp, x, y, g, o, a: xp.multiply(g, TWO_OVER_SQRT_PI * xp.exp(-x * x),
                                                   out=o), ("X",),
             doc="Out = erf(X) = 2 / sqrt(pi) * integral of exp(-t^2) from 0 to X")
