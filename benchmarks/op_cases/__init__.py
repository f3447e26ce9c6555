"""Cases for `bench_ops.py`: each new op timed against the NumPy expression a careful
person would write for it.

A module of this package per op family lists its cases in ``CASES``::

    OpCase("cumsum", inputs={"x": f32(256, 256)},
           layer=lambda x: fluid.layers.cumsum(x, axis=1),
           numpy=lambda x: np.cumsum(x, axis=1))

``inputs`` are the arrays fed to the method, in order, by data-var name; ``layer`` builds
the op from those vars inside a traced method (it may take more than one input and return a
var); ``numpy`` computes the same values from the arrays. Pick sizes where the op's own
work, not a call's fixed cost (a few µs), is what is timed: a few hundred thousand
elements is typical. ``rtol`` / ``atol`` bound the check that both compute the same.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class OpCase:
    name: str
    inputs: dict[str, np.ndarray]
    layer: Callable[..., Any]
    numpy: Callable[..., Any]
    rtol: float = 1e-5
    atol: float = 1e-6
    # data vars are declared with these shapes (append_batch_size=False); default: the
    # arrays' own shapes
    shapes: dict[str, list[int]] = field(default_factory=dict)


def f32(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Uniform float32 values in [low, high) of this shape, reproducibly."""
    return np.random.default_rng(seed).uniform(low, high, shape).astype("float32")


def i64(*shape: int, high: int, seed: int = 0) -> np.ndarray:
    """Uniform int64 values in [0, high) of this shape, reproducibly."""
    return np.random.default_rng(seed).integers(0, high, shape).astype("int64")


def all_cases() -> list[OpCase]:
    """Every module's cases, modules in name order."""
    cases: list[OpCase] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cases.extend(getattr(module, "CASES", []))
    return cases
