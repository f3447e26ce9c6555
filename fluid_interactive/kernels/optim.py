"""The compiled optimizer updates (the loops of `loops.py`) as kernel sources."""
from __future__ import annotations

import inspect
from functools import cache

from . import loops
from .build import KernelSource, module_text

#: how many arrays each loop takes first, scalars after them, arrays last
_SHAPE = {"sgd": (2, 1, 1), "momentum": (3, 2, 2), "momentum_nesterov": (3, 2, 2),
          "adam": (4, 6, 3), "adagrad": (3, 2, 2), "decayed_adagrad": (3, 4, 2),
          "rmsprop": (5, 5, 4), "rmsprop_centered": (5, 5, 4), "adadelta": (4, 3, 3),
          "adamax": (4, 5, 3), "ftrl": (4, 3, 3)}


@cache
def _text() -> str:
    return module_text(inspect.getsource(loops), loops.FUNCTIONS)


def update_source(function: str, dtype: str) -> KernelSource:
    """The compiled ``loops.<function>`` for flat arrays of ``dtype``."""
    ins, scalars, outs = _SHAPE[function]
    array, scalar = ("array", dtype, 1), ("scalar", dtype)
    return KernelSource("optim", _text(), function,
                        (array,) * ins + (scalar,) * scalars + (array,) * outs)
