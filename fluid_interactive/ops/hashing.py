"""``hash``: each row of an integer [N, D] tensor hashed ``num_hash`` times into
[0, mod_by), as Paddle's hash op does: Out[n, i, 0] = XXH64(bytes of row n, seed i) % mod_by,
in X's dtype.

XXH64 (the 64-bit xxHash of Yann Collet) is written here over arrays of uint64, every row
and every seed at once: the loops below run over the 8-byte lanes of one row (a count
fixed by D and the dtype), never over rows. Rows are read as their bytes in memory
(little-endian), as the C function reads them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.text import format_shape
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots

U64 = np.uint64
P1, P2, P3 = U64(11400714785074694791), U64(14029467366897019727), U64(1609587929392839161)
P4, P5 = U64(9650029242287828579), U64(2870177450012600261)


def _rotl(xp: Any, x: Any, r: int) -> Any:
    return xp.bitwise_or(xp.left_shift(x, U64(r)), xp.right_shift(x, U64(64 - r)))


def _round(xp: Any, acc: Any, lane: Any) -> Any:
    return _rotl(xp, acc + lane * P2, 31) * P1


def _stripes(xp: Any, w64: Any, seeds: Any, length: int) -> Any:
    """The four accumulators over every 32-byte stripe, merged (inputs of >= 32 bytes)."""
    acc = [seeds + P1 + P2, seeds + P2, seeds + U64(0), seeds - P1]
    for s in range(length // 32):
        for k in range(4):
            acc[k] = _round(xp, acc[k], w64[:, 4 * s + k][:, None])
    h = _rotl(xp, acc[0], 1) + _rotl(xp, acc[1], 7) + _rotl(xp, acc[2], 12) + _rotl(xp, acc[3], 18)
    for a in acc:
        h = (h ^ _round(xp, U64(0), a)) * P1 + P4
    return h


def xxh64(xp: Any, rows: Any, seeds: Any) -> Any:
    """XXH64 of each row of ``rows`` (uint8 [N, L], C-contiguous) under each seed of
    ``seeds`` (uint64 [S]): uint64 [N, S]."""
    n, length = rows.shape
    padded = xp.zeros((n, -(-length // 8) * 8), dtype=xp.uint8)
    padded[:, :length] = rows
    w64, w32 = padded.view(xp.uint64), padded.view(xp.uint32)
    seeds = seeds[None, :] + xp.zeros((n, 1), dtype=xp.uint64)   # [N, S]
    h = _stripes(xp, w64, seeds, length) if length >= 32 else seeds + P5
    h = h + U64(length)
    pos = length // 32 * 32
    while pos + 8 <= length:
        h = _rotl(xp, h ^ _round(xp, U64(0), w64[:, pos // 8][:, None]), 27) * P1 + P4
        pos += 8
    if pos + 4 <= length:
        h = _rotl(xp, h ^ (w32[:, pos // 4][:, None].astype(xp.uint64) * P1), 23) * P2 + P3
        pos += 4
    while pos < length:
        h = _rotl(xp, h ^ (rows[:, pos][:, None].astype(xp.uint64) * P5), 11) * P1
        pos += 1
    for shift, prime in ((33, P2), (29, P3), (32, None)):   # the avalanche
        h = xp.bitwise_xor(h, xp.right_shift(h, U64(shift)))
        h = h if prime is None else h * prime
    return h


def _hash_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in ("int32", "int64"):
        ctx.fail_dtype(f"X must be int32 or int64, got {x.dtype}")
    if x.rank != 2:
        ctx.fail(f"X must be 2-D [N, D] (one row of D values per item), got "
                 f"{format_shape(x.shape)}")
    if int(ctx.attrs["num_hash"]) < 1 or int(ctx.attrs["mod_by"]) < 1:
        ctx.fail(f"num_hash={ctx.attrs['num_hash']} and mod_by={ctx.attrs['mod_by']} must "
                 f"be positive")
    ctx.set_output("Out", (x.shape[0], int(ctx.attrs["num_hash"]), 1), x.dtype)


def _hash_kernel(ctx: KernelContext):
    xp = ctx.xp
    seeds = xp.arange(int(ctx.attrs["num_hash"]), dtype=xp.uint64)
    mod = U64(int(ctx.attrs["mod_by"]))
    o, x_type = ctx.output("Out"), ctx.input("X")
    row_bytes = x_type.shape[1] * np.dtype(x_type.dtype).itemsize

    def fn(x: Any) -> Any:
        rows = xp.ascontiguousarray(x).view(xp.uint8).reshape(x.shape[0], row_bytes)
        return (xxh64(xp, rows, seeds) % mod).astype(o.dtype).reshape(o.shape)
    return fn


register(OpSpec("hash", slots("X"), slots("Out"), _hash_infer, _hash_kernel,
                attrs={"num_hash": 1, "mod_by": 100000},
                doc="Out[n, i, 0] = XXH64(row n of X, seed i) % mod_by"))
