"""Layers that draw random values: uniform_random, gaussian_random, randn, randint,
randperm, their ``*_batch_size_like`` forms, sampling_id and random_crop.

Each op draws from a generator of its own, seeded from the program's seed (``Compile(seed=
...)``): the same seed gives the same values, and each call of the method draws the next
ones. A rewind puts the generators back with the state, so the calls after it draw again
what the rewound calls drew (docs/notebook.md). As in Paddle, a non-zero ``seed`` argument
makes an op draw the same values on every call instead. No gradient flows through a draw.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError
from ...ir.records import FLOAT_DTYPES, VarDesc
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .targets import append_into
from .tensor import _dtype, _ints

IntList = Sequence[int]


def _shape(shape: Any, layer: str) -> list[int]:
    if isinstance(shape, Variable):
        raise error_at(OpArgumentError, f"{layer}: a shape given as a Variable is not "
                                        f"supported; give a list of ints (for a batch size "
                                        f"known only at run time: {layer}_batch_size_like "
                                        f"or fill_constant_batch_size_like)")
    dims = _ints(shape, "shape", layer)
    if not dims or any(d <= 0 for d in dims):
        raise error_at(OpArgumentError, f"{layer}: shape {dims} must be a non-empty list of "
                                        f"positive sizes")
    return dims


def _seed(seed: Any, layer: str) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise error_at(OpArgumentError, f"{layer}: seed must be an int (0: the program's "
                                        f"seed), got {seed!r}")
    return seed


def _float_dtype(dtype: Any, layer: str) -> str:
    dt = _dtype(dtype, layer)
    if dt not in FLOAT_DTYPES - {"float16"}:
        raise error_at(OpArgumentError, f"{layer}: dtype must be float32 or float64, got "
                                        f"{dt!r}")
    return dt


def _int_dtype(dtype: Any, layer: str) -> str:
    dt = _dtype(dtype, layer)
    if dt not in ("int32", "int64"):
        raise error_at(OpArgumentError, f"{layer}: dtype must be int32 or int64, got {dt!r}")
    return dt


def _draw(layer: str, op_type: str, attrs: dict[str, Any], out: Variable | None = None,
          inputs: dict[str, Variable] | None = None, stop_gradient: bool = True,
          name: str | None = None) -> Variable:
    result = append_into(LayerHelper(layer, name), op_type, inputs or {}, attrs, out)
    result.stop_gradient = bool(stop_gradient)
    return result


def uniform_random(shape: IntList, dtype: Any = "float32", min: float = -1.0,
                   max: float = 1.0, seed: int = 0) -> Variable:
    """Values uniform in ``[min, max)`` of ``shape``."""
    return _draw("uniform_random", "uniform_random",
                 {"shape": _shape(shape, "uniform_random"), "min": float(min),
                  "max": float(max), "seed": _seed(seed, "uniform_random"),
                  "dtype": _float_dtype(dtype, "uniform_random")})


def gaussian_random(shape: IntList, mean: float = 0.0, std: float = 1.0, seed: int = 0,
                    dtype: Any = "float32") -> Variable:
    """Normal values of ``shape`` with mean ``mean`` and standard deviation ``std``."""
    return _draw("gaussian_random", "gaussian_random",
                 {"shape": _shape(shape, "gaussian_random"), "mean": float(mean),
                  "std": float(std), "seed": _seed(seed, "gaussian_random"),
                  "dtype": _float_dtype(dtype, "gaussian_random")})


def randn(shape: IntList, out: Variable | None = None, dtype: Any = None,
          device: str | None = None, stop_gradient: bool = True,
          name: str | None = None) -> Variable:
    """Standard normal values of ``shape`` (written into ``out`` when given). Unlike
    Paddle, which seeds each randn op at random, it draws from the program's seed, so a
    seed repeats its values. ``device`` is accepted for Paddle's signature."""
    attrs = {"shape": _shape(shape, "randn"), "mean": 0.0, "std": 1.0, "seed": 0,
             "dtype": _float_dtype(dtype or "float32", "randn")}
    return _draw("randn", "gaussian_random", attrs, out, stop_gradient=stop_gradient,
                 name=name)


def _like(layer: str, input: Variable, shape: IntList, dtype: Any, input_dim_idx: int,
          output_dim_idx: int, seed: int, extra: dict[str, float]) -> Variable:
    x = as_variable(input, f"{layer} input")
    dims = _ints(shape, "shape", layer)
    attrs = {"shape": dims, "dtype": _float_dtype(dtype, layer), "seed": _seed(seed, layer),
             "input_dim_idx": int(input_dim_idx), "output_dim_idx": int(output_dim_idx),
             **extra}
    return _draw(layer, layer, attrs, inputs={"Input": x})


def uniform_random_batch_size_like(input: Variable, shape: IntList, dtype: Any = "float32",
                                   input_dim_idx: int = 0, output_dim_idx: int = 0,
                                   min: float = -1.0, max: float = 1.0,
                                   seed: int = 0) -> Variable:
    """Uniform values in ``[min, max)`` of ``shape``, whose dim ``output_dim_idx`` is
    ``input``'s dim ``input_dim_idx`` when the method runs (a batch size)."""
    return _like("uniform_random_batch_size_like", input, shape, dtype, input_dim_idx,
                 output_dim_idx, seed, {"min": float(min), "max": float(max)})


def gaussian_random_batch_size_like(input: Variable, shape: IntList, input_dim_idx: int = 0,
                                    output_dim_idx: int = 0, mean: float = 0.0,
                                    std: float = 1.0, seed: int = 0,
                                    dtype: Any = "float32") -> Variable:
    """Normal values of ``shape``, whose dim ``output_dim_idx`` is ``input``'s dim
    ``input_dim_idx`` when the method runs (a batch size)."""
    return _like("gaussian_random_batch_size_like", input, shape, dtype, input_dim_idx,
                 output_dim_idx, seed, {"mean": float(mean), "std": float(std)})


def randint(low: int, high: int | None = None, shape: IntList | None = None,
            out: Variable | None = None, dtype: Any = None, device: str | None = None,
            stop_gradient: bool = False, seed: int = 0, name: str | None = None) -> Variable:
    """Integers uniform in ``[low, high)`` (``[0, low)`` with one bound) of ``shape``
    (default ``[1]``), int64 unless ``dtype`` says int32."""
    if high is None:
        low, high = 0, low
    for what, value in (("low", low), ("high", high)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise error_at(OpArgumentError, f"randint: {what} must be an int, got {value!r}")
    if low >= high:
        raise error_at(OpArgumentError, f"randint: low must be less than high, got low={low}, "
                                        f"high={high}")
    attrs = {"shape": _shape([1] if shape is None else shape, "randint"), "low": low,
             "high": high, "seed": _seed(seed, "randint"),
             "dtype": _int_dtype(dtype or "int64", "randint")}
    return _draw("randint", "randint", attrs, out, stop_gradient=stop_gradient, name=name)


def randperm(n: int, out: Variable | None = None, dtype: Any = "int64",
             device: str | None = None, stop_gradient: bool = True, seed: int = 0) -> Variable:
    """A random permutation of ``0 .. n-1``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise error_at(OpArgumentError, f"randperm: n must be an int >= 1, got {n!r}")
    attrs = {"n": n, "dtype": _int_dtype(dtype, "randperm"), "seed": _seed(seed, "randperm")}
    return _draw("randperm", "randperm", attrs, out, stop_gradient=stop_gradient)


def sampling_id(x: Variable, min: float = 0.0, max: float = 1.0, seed: int = 0,
                dtype: Any = "float32") -> Variable:
    """For each row of ``x`` ([batch, ids]: probabilities), an id drawn from it, as int64
    ``[batch]`` (ids are integers whatever ``dtype``, which is accepted for Paddle's
    signature): the first id whose running sum of probabilities exceeds a draw uniform in
    ``[min, max)``, or the last id."""
    x = as_variable(x, "sampling_id x")
    return _draw("sampling_id", "sampling_id", {"min": float(min), "max": float(max),
                                                "seed": _seed(seed, "sampling_id")},
                 inputs={"X": x})


def random_crop(x: Variable, shape: IntList, seed: int | Variable | None = None) -> Variable:
    """A window of ``shape`` (over ``x``'s last ``len(shape)`` dims) at a random place in
    each instance of ``x``: ``random_crop(images, [3, 24, 24])`` of ``[?, 3, 32, 32]`` is
    ``[?, 3, 24, 24]``. The places come from an int64 seed var of the program's state
    (Paddle's design): ``seed`` an int starts it there; None starts it from the program's
    seed; a Variable (int64 ``[1]``, persistable) is used and advanced as it is."""
    helper = LayerHelper("random_crop")
    x = as_variable(x, "random_crop x")
    dims = _ints(shape, "shape", "random_crop")
    trace = helper.trace
    if isinstance(seed, Variable):
        seed_var = as_variable(seed, "random_crop seed")
    else:
        name = trace.state_names.generate("random_crop_seed")
        trace.declare(VarDesc(name, (1,), "int64", persistable=True, stop_gradient=True),
                      in_global=True)
        if seed is None:   # a start drawn from the program's seed
            init = ("randint", {"shape": [1], "low": 0, "high": 2 ** 62, "dtype": "int64"})
        else:
            init = ("fill_constant", {"shape": [1], "dtype": "int64", "value": _seed(seed,
                                                                                 "random_crop")})
        trace.append_op(init[0], {}, {"Out": [name]}, init[1], in_global=True)
        seed_var = Variable(trace, name)
    outs = helper.append("random_crop", {"X": x, "Seed": seed_var},
                         {"shape": dims, "startup_seed": 0 if seed is None or isinstance(
                             seed, Variable) else int(seed)},
                         outputs={"SeedOut": [seed_var.name]})
    return outs["Out"][0]


__all__ = ["uniform_random", "gaussian_random", "randn", "uniform_random_batch_size_like",
           "gaussian_random_batch_size_like", "randint", "randperm", "sampling_id",
           "random_crop"]
