"""Ops that create values: constants and the random initialisers.

Random initialisers draw on the host with NumPy (so a seed gives the same values on every
backend) and copy to the device once; they run in block 0 when a program compiles. The
same ops inside a method draw on every call (`random_kernel`; ops/random.py has the other
random ops).
"""
from __future__ import annotations

import numpy as np

from ..ir.text import format_shape
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots


def _shape_dtype_infer(ctx: InferContext) -> None:
    shape = tuple(int(d) for d in ctx.attrs["shape"])
    if any(d < 0 for d in shape) and not ctx.has_input("Like"):
        ctx.fail(f"shape {format_shape(shape)} has an unknown dim; give a concrete shape")
    ctx.set_output("Out", shape, ctx.attrs["dtype"])


def _fill_constant_infer(ctx: InferContext) -> None:
    if ctx.has_input("ValueTensor") and any(d not in (1, -1)
                                            for d in ctx.input("ValueTensor").shape):
        ctx.fail(f"ValueTensor must hold one value, got shape "
                 f"{format_shape(ctx.input('ValueTensor').shape)}")
    _shape_dtype_infer(ctx)


def _fill_constant_kernel(ctx: KernelContext):
    xp = ctx.xp
    o = ctx.output("Out")
    if ctx.has_input("ValueTensor"):   # the value is known when the op runs
        out = ctx.buffer("Out")

        def fill(v):
            target = out if out is not None else xp.empty(o.shape, o.dtype)
            xp.copyto(target, v.reshape(()).astype(o.dtype, copy=False))
            return target
        return fill
    value = xp.full(o.shape, ctx.attrs["value"], dtype=o.dtype)
    # Kernels never write into their inputs, so handing out one array every call is safe.
    return lambda: value


def _constant_rows(attrs, draws):
    return np.full((draws.count, draws.width), attrs["value"])


register(OpSpec("fill_constant", slots("ValueTensor?"), slots("Out"), _fill_constant_infer,
                _fill_constant_kernel,
                attrs={"shape": [1], "dtype": "float32", "value": 0.0}, rows=_constant_rows,
                doc="Out = a tensor of `shape` filled with `value` (or the one value of "
                    "ValueTensor)."))


def random_kernel(draw):
    """The kernel of an op drawing ``draw(rng, shape, attrs)`` on the host in Out's shape.
    With ``seed`` 0 it draws from the program's generator for the op (``ctx.rng``: the
    stream goes on from call to call); with another seed, as in Paddle, from a generator
    seeded with it afresh on every call, so every call draws the same values. Inputs (a
    ``*_batch_size_like`` op's Input) are read for their shape only."""
    def factory(ctx: KernelContext):
        xp = ctx.xp
        o = ctx.output("Out")
        seed = int(ctx.attrs["seed"])

        def fn(*shape_inputs):
            rng = ctx.rng if seed == 0 else np.random.default_rng(seed & (2 ** 63 - 1))
            return xp.asarray(draw(rng, o.shape, ctx.attrs).astype(o.dtype, copy=False))
        return fn
    return factory


def _uniform(rng, shape, attrs):
    return rng.uniform(attrs["min"], attrs["max"], size=shape)


def _gaussian(rng, shape, attrs):
    return rng.normal(attrs["mean"], attrs["std"], size=shape)


def _truncated_gaussian(rng, shape, attrs):
    """Normal values redrawn until they fall within two standard deviations."""
    mean, std = attrs["mean"], attrs["std"]
    values = rng.normal(mean, std, size=shape)
    bad = np.abs(values - mean) > 2 * std
    while bad.any():
        values[bad] = rng.normal(mean, std, size=int(bad.sum()))
        bad = np.abs(values - mean) > 2 * std
    return values


# The same draws by row (OpSpec.rows; ops/row_random.py): each row from its own stream.

def _uniform_rows(attrs, draws):
    return attrs["min"] + (attrs["max"] - attrs["min"]) * draws.uniform()


def _gaussian_rows(attrs, draws):
    return attrs["mean"] + attrs["std"] * draws.normal()


def _truncated_gaussian_rows(attrs, draws):
    """Each value redrawn from the next round of its row's stream until it falls within
    two standard deviations."""
    mean, std = attrs["mean"], attrs["std"]
    values = draws.normal()
    bad = np.abs(values) > 2
    round_ = 1
    while bad.any():
        values = np.where(bad, draws.normal(round_), values)
        bad = np.abs(values) > 2
        round_ += 1
    return mean + std * values


_RANDOM = {"shape": [1], "dtype": "float32", "seed": 0}
register(OpSpec("uniform_random", (), slots("Out"), _shape_dtype_infer,
                random_kernel(_uniform), attrs={**_RANDOM, "min": -1.0, "max": 1.0},
                random=True, rows=_uniform_rows, host_access="draws",
                doc="Uniform values in [min, max)."))
register(OpSpec("gaussian_random", (), slots("Out"), _shape_dtype_infer,
                random_kernel(_gaussian), attrs={**_RANDOM, "mean": 0.0, "std": 1.0},
                random=True, rows=_gaussian_rows, host_access="draws",
                doc="Normal values."))
register(OpSpec("truncated_gaussian_random", (), slots("Out"), _shape_dtype_infer,
                random_kernel(_truncated_gaussian),
                attrs={**_RANDOM, "mean": 0.0, "std": 1.0}, random=True, host_access="draws",
                rows=_truncated_gaussian_rows,
                doc="Normal values, redrawn until within two standard deviations of the mean."))


def _assign_value_kernel(ctx: KernelContext):
    xp = ctx.xp
    o = ctx.output("Out")
    value = xp.asarray(np.asarray(ctx.attrs["values"], dtype=o.dtype).reshape(o.shape))
    return lambda: value


register(OpSpec("assign_value", (), slots("Out"), _shape_dtype_infer, _assign_value_kernel,
                attrs={"shape": [1], "dtype": "float32", "values": [0.0]},
                doc="Out = the listed values (row-major) in `shape`."))


def batch_size_like_infer(ctx: InferContext) -> None:
    x = ctx.input("Input")
    shape = [int(d) for d in ctx.attrs["shape"]]
    i, o = ctx.attrs["input_dim_idx"], ctx.attrs["output_dim_idx"]
    if not (0 <= i < len(x.shape) and 0 <= o < len(shape)):
        ctx.fail(f"input_dim_idx={i} or output_dim_idx={o} is out of range for Input "
                 f"{format_shape(x.shape)} and shape {format_shape(shape)}")
    shape[o] = x.shape[i]
    ctx.set_output("Out", shape, ctx.attrs["dtype"])


def _batch_size_like_kernel(ctx: KernelContext):
    o = ctx.output("Out")
    value = ctx.xp.full(o.shape, ctx.attrs["value"], dtype=o.dtype)
    return lambda x: value   # never written: kernels do not write their inputs


register(OpSpec("fill_constant_batch_size_like", slots("Input"), slots("Out"),
                batch_size_like_infer, _batch_size_like_kernel, shape_only=("Input",),
                attrs={"shape": [1], "dtype": "float32", "value": 0.0, "input_dim_idx": 0,
                       "output_dim_idx": 0},
                doc="Out = `value` in `shape`, whose dim output_dim_idx is Input's dim "
                    "input_dim_idx (a batch size known only at run time)"))


# The random ops again, with a dim (a batch size) taken from Input when the method runs.
_LIKE = {"shape": [1], "dtype": "float32", "seed": 0, "input_dim_idx": 0, "output_dim_idx": 0}
register(OpSpec("uniform_random_batch_size_like", slots("Input"), slots("Out"),
                batch_size_like_infer, random_kernel(_uniform), shape_only=("Input",),
                attrs={**_LIKE, "min": -1.0, "max": 1.0}, random=True, host_access="draws",
                doc="Uniform values in [min, max) in `shape`, whose dim output_dim_idx is "
                    "Input's dim input_dim_idx"))
register(OpSpec("gaussian_random_batch_size_like", slots("Input"), slots("Out"),
                batch_size_like_infer, random_kernel(_gaussian), shape_only=("Input",),
                attrs={**_LIKE, "mean": 0.0, "std": 1.0}, random=True, host_access="draws",
                doc="Normal values in `shape`, whose dim output_dim_idx is Input's dim "
                    "input_dim_idx"))
