"""Initializers: each appends one op to block 0 that fills a parameter when the program
compiles. Defaults follow Paddle: Xavier-uniform weights, zero biases.

``seed=0`` means "use the program's seed" (``Compile(seed=...)``); values are then
reproducible and independent of which other parameters exist.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import OpArgumentError
from .tracing import error_at


def fans(shape: Sequence[int]) -> tuple[int, int]:
    """(fan_in, fan_out): a matrix [in, out]; a conv filter [out_c, in_c, k...] uses the
    receptive field size."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _check_scale(init: Initializer, scale: float) -> None:
    if not scale >= 0:
        raise error_at(OpArgumentError, f"{init!r}: scale (the standard deviation) must not "
                                        f"be negative")


class Initializer:
    def op(self, shape: Sequence[int], dtype: str) -> tuple[str, dict]:
        """The op type and attrs that fill a var of this shape and dtype."""
        raise NotImplementedError


@dataclass
class Constant(Initializer):
    value: float = 0.0

    def op(self, shape, dtype):
        return "fill_constant", {"shape": list(shape), "dtype": dtype, "value": float(self.value)}


@dataclass
class Uniform(Initializer):
    low: float = -1.0
    high: float = 1.0
    seed: int = 0

    def op(self, shape, dtype):
        if not self.low <= self.high:
            raise error_at(OpArgumentError, f"Uniform(low={self.low}, high={self.high}): low "
                                            f"must not exceed high")
        return "uniform_random", {"shape": list(shape), "dtype": dtype, "min": float(self.low),
                                  "max": float(self.high), "seed": int(self.seed)}


@dataclass
class Normal(Initializer):
    loc: float = 0.0
    scale: float = 1.0
    seed: int = 0

    def op(self, shape, dtype):
        _check_scale(self, self.scale)
        return "gaussian_random", {"shape": list(shape), "dtype": dtype,
                                   "mean": float(self.loc), "std": float(self.scale),
                                   "seed": int(self.seed)}


@dataclass
class TruncatedNormal(Initializer):
    loc: float = 0.0
    scale: float = 1.0
    seed: int = 0

    def op(self, shape, dtype):
        _check_scale(self, self.scale)
        return "truncated_gaussian_random", {"shape": list(shape), "dtype": dtype,
                                             "mean": float(self.loc), "std": float(self.scale),
                                             "seed": int(self.seed)}


@dataclass
class Xavier(Initializer):
    uniform: bool = True
    fan_in: int | None = None
    fan_out: int | None = None
    seed: int = 0

    def op(self, shape, dtype):
        f_in, f_out = fans(shape)
        f_in = self.fan_in or f_in
        f_out = self.fan_out or f_out
        if self.uniform:
            limit = math.sqrt(6.0 / (f_in + f_out))
            return Uniform(-limit, limit, self.seed).op(shape, dtype)
        return Normal(0.0, math.sqrt(2.0 / (f_in + f_out)), self.seed).op(shape, dtype)


@dataclass
class MSRA(Initializer):
    uniform: bool = True
    fan_in: int | None = None
    seed: int = 0

    def op(self, shape, dtype):
        f_in = self.fan_in or fans(shape)[0]
        if self.uniform:
            limit = math.sqrt(6.0 / f_in)
            return Uniform(-limit, limit, self.seed).op(shape, dtype)
        return Normal(0.0, math.sqrt(2.0 / f_in), self.seed).op(shape, dtype)


class NumpyArray(Initializer):
    """Start from the given values (their shape must be the parameter's)."""

    def __init__(self, value):
        self.value = np.array(value)

    def op(self, shape, dtype):
        if tuple(self.value.shape) != tuple(shape):
            raise error_at(OpArgumentError, f"NumpyArrayInitializer holds shape "
                                            f"{list(self.value.shape)}; the parameter has "
                                            f"shape {list(shape)}")
        values = self.value.astype(dtype).reshape(-1).tolist()
        return "assign_value", {"shape": list(shape), "dtype": dtype, "values": values}

    def __repr__(self) -> str:
        return f"NumpyArray(shape={list(self.value.shape)})"


class Bilinear(Initializer):
    """The kernel of bilinear upsampling, for a conv2d_transpose filter [C_in, C_out, k, k]
    (with groups = channels, each channel upsampled on its own): every [k, k] slice is
    the outer product of ``1 - |x / f - c|`` with itself, ``f = ceil(k / 2)``, ``c = (2f
    - 1 - f % 2) / 2f`` (stride ``f`` upsamples by ``f``)."""

    def op(self, shape, dtype):
        if len(shape) != 4 or shape[2] != shape[3]:
            raise error_at(OpArgumentError, f"BilinearInitializer fills a 4-D filter with "
                                            f"square kernels [C_in, C_out, k, k]; the "
                                            f"parameter has shape {list(shape)}")
        if math.prod(shape) > 1024 * 1024:
            raise error_at(OpArgumentError, f"BilinearInitializer: the filter {list(shape)} "
                                            f"has more than 1024 * 1024 values (Paddle's "
                                            f"limit for a program's constant)")
        size = shape[3]
        f = math.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        taps = 1 - np.abs(np.arange(size) / f - c)
        kernel = np.broadcast_to(np.outer(taps, taps), tuple(shape))
        return "assign_value", {"shape": list(shape), "dtype": dtype,
                                "values": kernel.astype(dtype).reshape(-1).tolist()}

    def __repr__(self) -> str:
        return "Bilinear()"


ConstantInitializer = Constant
UniformInitializer = Uniform
NormalInitializer = Normal
TruncatedNormalInitializer = TruncatedNormal
XavierInitializer = Xavier
MSRAInitializer = MSRA
NumpyArrayInitializer = NumpyArray
BilinearInitializer = Bilinear

__all__ = ["Initializer", "Constant", "Uniform", "Normal", "TruncatedNormal", "Xavier", "MSRA",
           "NumpyArray", "ConstantInitializer", "UniformInitializer", "NormalInitializer",
           "TruncatedNormalInitializer", "XavierInitializer", "MSRAInitializer",
           "NumpyArrayInitializer", "Bilinear", "BilinearInitializer"]
