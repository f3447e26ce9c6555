"""Weight decay: L2 adds ``coeff * param`` to the gradient, L1 adds ``coeff * sign(param)``.
Given to an optimizer (``regularization=``) or to one parameter (its ParamAttr wins).

``L2Decay(1e-4)``, ``L2Decay(coeff=1e-4)`` and Paddle's ``L2Decay(regularization_coeff=1e-4)``
mean the same.
"""
from __future__ import annotations

from numbers import Real
from typing import Any

from ..errors import OpArgumentError
from .tracing import error_at


class WeightDecayRegularizer:
    """Base class: a non-negative coefficient; subclasses say which term it scales."""

    coeff: float

    def __init__(self, regularization_coeff: float = 0.0, *, coeff: float | None = None):
        value = regularization_coeff if coeff is None else coeff
        if not isinstance(value, Real) or isinstance(value, bool) or not value >= 0:
            raise error_at(OpArgumentError, f"{type(self).__name__} coefficient must be a "
                                            f"non-negative number, got {value!r}")
        self.coeff = float(value)

    @property
    def regularization_coeff(self) -> float:
        return self.coeff

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other.coeff == self.coeff

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.coeff))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(coeff={self.coeff})"


class L2Decay(WeightDecayRegularizer):
    """Adds ``coeff * param`` to the parameter's gradient."""


class L1Decay(WeightDecayRegularizer):
    """Adds ``coeff * sign(param)`` to the parameter's gradient."""


L2DecayRegularizer = L2Decay
L1DecayRegularizer = L1Decay

__all__ = ["WeightDecayRegularizer", "L2Decay", "L1Decay", "L2DecayRegularizer",
           "L1DecayRegularizer"]
