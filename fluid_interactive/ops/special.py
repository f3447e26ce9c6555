"""The error function, elementwise and written against ``xp`` (NumPy has none).

Two Chebyshev series, fitted once at import to Python's ``math.erf`` / ``math.erfc`` at
Chebyshev nodes (a loop over a few dozen numbers, not over elements), then summed per
element by Clenshaw's recurrence, a short loop over the coefficients:

* for ``|x| < 1``: ``erf(x) = x * h(x*x)``, h smooth on [0, 1], so tiny inputs keep their
  full relative precision;
* for ``|x| >= 1``: ``erf(x) = 1 - exp(q(|x|) - x*x)``, q = log(erfc) + x*x, which
  varies slowly, fitted up to 6 (4 for float32), where erfc falls below half a unit in
  the last place of 1 and erf rounds to +-1.

They agree with ``math.erf`` to a few units in the last place (float64 and float32).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

_SPLIT = 1.0
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _fit(f: Any, lo: float, hi: float, degree: int, tol: float) -> tuple[float, ...]:
    """Chebyshev coefficients of ``f`` on [lo, hi] (f takes a float), without the trailing
    ones below ``tol`` relative to the largest (those are rounding noise, or below the
    precision wanted)."""
    k = np.arange(degree + 1)
    nodes = np.cos(math.pi * (k + 0.5) / (degree + 1))
    values = np.array([f(lo + (hi - lo) * (t + 1.0) / 2.0) for t in nodes])
    coeffs = np.polynomial.chebyshev.chebfit(nodes, values, degree)
    keep = int(np.nonzero(np.abs(coeffs) > tol * np.abs(coeffs).max())[0].max()) + 1
    return tuple(float(c) for c in coeffs[:keep])


def _h(u: float) -> float:
    """erf(sqrt(u)) / sqrt(u), with its limit at 0."""
    if u == 0.0:
        return TWO_OVER_SQRT_PI
    r = math.sqrt(u)
    return math.erf(r) / r


def _q(z: float) -> float:
    return math.log(math.erfc(z)) + z * z


@dataclass(frozen=True)
class _Series:
    """The two series of one precision: h on u = x*x in [0, SPLIT^2] and q on z in
    [SPLIT, end], as Chebyshev coefficients in the variable mapped to [-1, 1] (float64),
    or as power coefficients in it for Horner's rule (float32: fewer passes over the
    array, and the float32 rounding of the power form stays below float32's own)."""
    small: tuple[float, ...]
    large: tuple[float, ...]
    end: float          # erf is +-1 in this precision beyond it
    horner: bool


def _series(tol: float, end: float, horner: bool) -> _Series:
    small = _fit(_h, 0.0, _SPLIT * _SPLIT, 24, tol)
    large = _fit(_q, _SPLIT, end, 40, tol)
    if horner:
        small, large = (tuple(float(c) for c in np.polynomial.chebyshev.cheb2poly(s))
                        for s in (small, large))
    return _Series(small, large, end, horner)


_SERIES = {"float64": _series(4e-16, 6.0, False), "float32": _series(1e-8, 4.0, True)}


def _clenshaw(xp: Any, coeffs: tuple[float, ...], t: Any) -> Any:
    """sum_k coeffs[k] T_k(t), for t in [-1, 1]; in place, three arrays in turn."""
    two_t = 2.0 * t
    b1, b2, new = xp.full_like(t, coeffs[-1]), xp.zeros_like(t), xp.empty_like(t)
    for c in coeffs[-2:0:-1]:
        xp.multiply(two_t, b1, out=new)
        new -= b2
        new += c
        b1, b2, new = new, b1, b2
    xp.multiply(t, b1, out=b1)
    b1 -= b2
    b1 += coeffs[0]
    return b1


def _horner(xp: Any, coeffs: tuple[float, ...], t: Any) -> Any:
    """sum_k coeffs[k] t^k, in place."""
    r = t * coeffs[-1]
    r += coeffs[-2]
    for c in coeffs[-3::-1]:
        r *= t
        r += c
    return r


def erf(xp: Any, x: Any) -> Any:
    """erf(x) elementwise, in x's float dtype (float16 computed in float32)."""
    work = "float64" if x.dtype == "float64" else "float32"
    series = _SERIES[work]
    evaluate = _horner if series.horner else _clenshaw
    a = xp.abs(x).astype(work, copy=False)
    t = xp.minimum(a, _SPLIT)
    xp.multiply(t, t, out=t)            # u = x*x on the small range, mapped to [-1, 1]
    t *= 2.0 / (_SPLIT * _SPLIT)
    t -= 1.0
    small = evaluate(xp, series.small, t)
    small *= a
    z = xp.clip(a, _SPLIT, series.end)
    xp.multiply(z, 2.0 / (series.end - _SPLIT), out=t)
    t -= (series.end + _SPLIT) / (series.end - _SPLIT)
    large = evaluate(xp, series.large, t)
    large -= xp.multiply(z, z, out=z)
    large = xp.exp(large, out=large)
    xp.subtract(1.0, large, out=large)
    # beyond the end, z was clipped to it and 1 - erfc(end) rounds to 1; NaN fails the
    # test and keeps the small range's NaN
    r = xp.where(a >= _SPLIT, large, small)
    return xp.copysign(r, x).astype(x.dtype, copy=False)
