"""Weight decay: L2 adds ``coeff * param`` to the gradient, L1 adds ``coeff * sign(param)``.
Given to an optimizer (``regularization=``) or to one parameter (its ParamAttr wins)."""
from __future__ import annotations

from dataclasses import dataclass


class WeightDecayRegularizer:
    coeff: float


@dataclass
class L2Decay(WeightDecayRegularizer):
    coeff: float = 0.0


@dataclass
class L1Decay(WeightDecayRegularizer):
    coeff: float = 0.0


L2DecayRegularizer = L2Decay
L1DecayRegularizer = L1Decay
