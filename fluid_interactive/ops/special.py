"""The error function, elementwise and written against ``xp`` (NumPy has none).

Two Chebyshev series, fitted once at import to Python's ``math.erf`` / ``math.erfc`` at
Chebyshev nodes (a loop over a few dozen numbers, not over elements), then summed per
element by Clenshaw's recurrence, a short loop over the coefficients:

* for ``|x| < 1``: ``erf(x) = x * h(x*x)``, h smooth on [0, 1], so tiny inputs keep their
  full relative precision;
* for ``1 <= |x| < 6``: ``erf(x) = 1 - exp(q(|x|) - x*x)``, q = log(erfc) + x*x, which
  varies slowly; beyond 6, erfc is below float64's resolution of 1 and erf is +-1.

Both agree with ``math.erf`` to a few units in the last place of float64.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

_SPLIT, _END = 1.0, 6.0
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


#: dtype -> (the series of h, the series of q): float32 needs far fewer terms.
_SERIES = {dtype: (_fit(_h, 0.0, _SPLIT * _SPLIT, 24, tol),
                   _fit(_q, _SPLIT, _END, 40, tol))
           for dtype, tol in (("float64", 4e-16), ("float32", 1e-8))}


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


def erf(xp: Any, x: Any) -> Any:
    """erf(x) elementwise, in x's float dtype (float16 computed in float32)."""
    work = "float64" if x.dtype == "float64" else "float32"
    small_series, large_series = _SERIES[work]
    a = xp.abs(x).astype(work)
    inner = xp.minimum(a, _SPLIT)
    u = inner * inner
    small = a * _clenshaw(xp, small_series, 2.0 * u / (_SPLIT * _SPLIT) - 1.0)
    z = xp.clip(a, _SPLIT, _END)
    q = _clenshaw(xp, large_series, (2.0 * z - (_SPLIT + _END)) / (_END - _SPLIT))
    large = 1.0 - xp.exp(q - z * z)
    r = xp.where(a < _SPLIT, small, xp.where(a < _END, large, 1.0))
    r = xp.where(xp.isnan(a), a, r)
    return xp.copysign(r, x).astype(x.dtype, copy=False)
