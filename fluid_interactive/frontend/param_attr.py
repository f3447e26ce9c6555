"""`ParamAttr`: how a layer's parameter is named, initialised, regularised and trained."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .initializer import Initializer
from .regularizer import WeightDecayRegularizer


@dataclass
class ParamAttr:
    """``name`` shares a parameter explicitly (same name = same array; no var_scope prefix
    is added); ``initializer`` overrides the layer's default; ``learning_rate`` scales the
    optimizer's rate for this parameter; ``trainable=False`` freezes it; ``gradient_clip``
    (a `fluid.clip` gradient clip) clips its gradient unless the optimizer has its own
    ``grad_clip``; ``do_model_average=False`` leaves it out of `ModelAverage` and
    `ExponentialMovingAverage`."""
    name: str | None = None
    initializer: Initializer | None = None
    learning_rate: float = 1.0
    regularizer: WeightDecayRegularizer | None = None
    trainable: bool = True
    gradient_clip: Any = None
    do_model_average: bool = True


def to_param_attr(value: Any, what: str) -> ParamAttr | None:
    """None -> defaults; a str -> a name; an Initializer or a regularizer -> that;
    False -> no parameter at all (e.g. ``bias_attr=False``)."""
    if value is None or value is True:
        return ParamAttr()
    if value is False:
        return None
    if isinstance(value, ParamAttr):
        return value
    if isinstance(value, str):
        return ParamAttr(name=value)
    if isinstance(value, Initializer):
        return ParamAttr(initializer=value)
    if isinstance(value, WeightDecayRegularizer):
        return ParamAttr(regularizer=value)
    raise TypeError(f"{what} must be None, False, a name, an initializer, a regularizer or a "
                    f"fluid.ParamAttr; got {type(value).__name__}")
