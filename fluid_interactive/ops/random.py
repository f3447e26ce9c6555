"""Random ops beyond the initialisers of ops/fill.py: randint, randperm, sampling_id,
random_crop.

``randint``      Out = integers uniform in [low, high) in ``shape``.
``randperm``     Out [n] = a random permutation of 0 .. n-1.
``sampling_id``  Out [B] (int64) = for each row of X [B, W] (the probabilities of W ids),
                 an id drawn from it: the first j whose running sum of X exceeds a uniform
                 draw r in [min, max), or W - 1 when none does.
``random_crop``  Out = a window of ``shape`` (the last len(shape) dims of X) at a random
                 place in each instance of X (the leading dims). As in Paddle, its
                 randomness is state: the int64 Seed (a persistable var) picks the
                 windows and SeedOut is the next seed, so a checkpoint or a rewind takes
                 the crops back with the other state.

randint, randperm and sampling_id draw on the host from the program's generator for the op
(``seed`` 0) or, with another seed, from one seeded afresh each call (ops/fill.py,
`random_kernel`), so a seed gives the same values on every backend.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from ..ir.text import format_shape
from .fill import random_kernel
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots

_SEED_MASK = 2 ** 63 - 1   # seeds of NumPy's generators are non-negative


# --- randint, randperm --------------------------------------------------------------------------

def _randint_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    shape = [int(d) for d in a["shape"]]
    if not shape or any(d < 0 for d in shape):
        ctx.fail(f"shape {shape} must be a non-empty list of sizes >= 0")
    if a["dtype"] not in ("int32", "int64"):
        ctx.fail_dtype(f"dtype must be int32 or int64, got {a['dtype']!r}")
    if int(a["low"]) >= int(a["high"]):
        ctx.fail(f"low={a['low']} must be less than high={a['high']}")
    ctx.set_output("Out", shape, a["dtype"])


def _integers(rng: Any, shape: tuple[int, ...], attrs: Any) -> Any:
    return rng.integers(int(attrs["low"]), int(attrs["high"]), size=shape)


register(OpSpec("randint", (), slots("Out"), _randint_infer, random_kernel(_integers),
                attrs={"shape": [1], "low": 0, "high": 1, "dtype": "int64", "seed": 0},
                random=True, host_access="draws",
                doc="Out = integers uniform in [low, high) in `shape`"))


def _randperm_infer(ctx: InferContext) -> None:
    n = int(ctx.attrs["n"])
    if n < 1:
        ctx.fail(f"n={n} must be at least 1")
    if ctx.attrs["dtype"] not in ("int32", "int64"):
        ctx.fail_dtype(f"dtype must be int32 or int64, got {ctx.attrs['dtype']!r}")
    ctx.set_output("Out", (n,), ctx.attrs["dtype"])


register(OpSpec("randperm", (), slots("Out"), _randperm_infer,
                random_kernel(lambda rng, shape, attrs: rng.permutation(int(attrs["n"]))),
                attrs={"n": 1, "dtype": "int64", "seed": 0}, random=True, host_access="draws",
                doc="Out [n] = a random permutation of 0 .. n-1"))


# --- sampling_id --------------------------------------------------------------------------------

def _sampling_id_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.rank != 2:
        ctx.fail(f"X must be [batch, ids] probabilities, got {format_shape(x.shape)}")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"X must hold float probabilities, got {x.dtype}")
    ctx.set_output("Out", (x.shape[0],), "int64")


def _sampling_id_kernel(ctx: KernelContext):
    xp, a = ctx.xp, ctx.attrs
    batch, width = ctx.input("X").shape
    low, high, seed = float(a["min"]), float(a["max"]), int(a["seed"])
    last = xp.asarray(width - 1, dtype="int64")

    def fn(x: Any) -> Any:
        rng = ctx.rng if seed == 0 else np.random.default_rng(seed & _SEED_MASK)
        r = xp.asarray(rng.uniform(low, high, size=(batch, 1)).astype(x.dtype))
        # the first id whose running sum exceeds r: how many running sums do not
        picked = xp.sum(xp.cumsum(x, axis=1) <= r, axis=1)
        return xp.minimum(picked, last).astype("int64", copy=False)
    return fn


register(OpSpec("sampling_id", slots("X"), slots("Out"), _sampling_id_infer,
                _sampling_id_kernel, attrs={"min": 0.0, "max": 1.0, "seed": 0},
                random=True, host_access="draws",
                doc="Out [B] = an id drawn from each row of X's probabilities"))


# --- random_crop --------------------------------------------------------------------------------

def _random_crop_infer(ctx: InferContext) -> None:
    x, seed = ctx.input("X"), ctx.input("Seed")
    shape = [int(d) for d in ctx.attrs["shape"]]
    lead = x.rank - len(shape)
    if not shape or lead < 1:
        ctx.fail(f"shape {shape} must give the window of the last dims of X "
                 f"{format_shape(x.shape)} and leave at least one leading (instance) dim")
    too_big = [(d, s) for d, s in zip(x.shape[lead:], shape) if s < 1 or 0 <= d < s]
    if too_big:
        ctx.fail(f"the window {shape} does not fit X {format_shape(x.shape)}: a window "
                 f"size must be between 1 and the dim it crops")
    if seed.dtype != "int64" or any(d not in (1, -1) for d in seed.shape):
        ctx.fail_dtype(f"Seed must be an int64 [1] var, got {seed.dtype}{list(seed.shape)}")
    if x.dtype not in FLOAT_DTYPES | INT_DTYPES:
        ctx.fail_dtype(f"X must be a float or int tensor, got {x.dtype}")
    ctx.set_output("Out", tuple(x.shape[:lead]) + tuple(shape), x.dtype)
    ctx.set_output("SeedOut", (1,), "int64")


def _crop_index(xp: Any, offsets: list, window: list[int], count: int) -> tuple:
    """Index arrays taking each instance's window: instance i, then dim k from
    offsets[k][i] for window[k] positions, broadcast against each other."""
    rank = len(window) + 1
    index = [xp.arange(count).reshape((count,) + (1,) * (rank - 1))]
    for k, (off, size) in enumerate(zip(offsets, window)):
        spread = [1] * rank
        spread[k + 1] = size
        index.append(off.reshape((count,) + (1,) * (rank - 1)) +
                     xp.arange(size).reshape(spread))
    return tuple(index)


def _random_crop_kernel(ctx: KernelContext):
    xp, x, o = ctx.xp, ctx.input("X"), ctx.output("Out")
    window = [int(d) for d in ctx.attrs["shape"]]
    lead = x.rank - len(window)
    count = int(np.prod(x.shape[:lead], dtype=np.int64))
    spare = [d - s for d, s in zip(x.shape[lead:], window)]

    def fn(a: Any, seed: Any) -> Any:
        gen = xp.random.default_rng(int(seed.reshape(-1)[0]) & _SEED_MASK)   # one read
        offsets = [gen.integers(0, s + 1, size=count) for s in spare]
        instances = a.reshape((count,) + tuple(x.shape[lead:]))
        out = instances[_crop_index(xp, offsets, window, count)].reshape(o.shape)
        return out, gen.integers(0, 2 ** 62, size=1, dtype="int64")
    return fn


register(OpSpec("random_crop", slots("X", "Seed"), slots("Out", "SeedOut"), _random_crop_infer,
                _random_crop_kernel, attrs={"shape": [1], "startup_seed": 0}, random=True,
                host_access="reads", updates=(("SeedOut", "Seed"),),
                doc="Out = a window of `shape` at a random place of each instance of X; "
                    "Seed picks the places, SeedOut is the next seed"))
