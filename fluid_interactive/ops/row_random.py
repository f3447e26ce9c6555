"""Random numbers addressed by row: the values of row ``id`` of a table come from a stream of
their own, keyed by (seed, table, id), so a table whose rows are made on first use (a
parameter server's shard) gives each row the same first value whichever rows came before
it, on whichever server, in whatever order.

The streams are counter-based: each number is a 64-bit mix (SplitMix64's finaliser) of the
key, the row id, the column and the draw's round, computed for a whole batch of rows at once
with NumPy's wrapping uint64 arithmetic. Initialisers use them through their spec's
``rows`` (ops/fill.py).
"""
from __future__ import annotations

import zlib

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on every element (uint64 arrays wrap on overflow)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def row_key(seed: int | None, name: str) -> int:
    """The key of a table's streams: its seed (an initialiser's own, else the program's)
    and its name."""
    base = np.array([(int(seed or 0) & _MASK) ^ (zlib.crc32(name.encode()) << 32)],
                    dtype=np.uint64)
    return int(_mix(base)[0])


class RowDraws:
    """The random numbers of ``ids`` (int64, one per row) for rows ``width`` wide."""

    def __init__(self, key: int, ids: np.ndarray, width: int):
        self.ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        self.width = int(width)
        self._base = _mix(self.ids.view(np.uint64) ^ np.uint64(key & _MASK))

    @property
    def count(self) -> int:
        return int(self.ids.size)

    def uniform(self, round_: int = 0) -> np.ndarray:
        """float64 [rows, width] in [0, 1), round ``round_`` of each row's stream."""
        cols = np.arange(self.width, dtype=np.uint64) + np.uint64(round_ * self.width + 1)
        z = _mix(self._base[:, None] + cols[None, :] * _GOLDEN)
        return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def normal(self, round_: int = 0) -> np.ndarray:
        """Standard normal float64 [rows, width] (Box-Muller on rounds 2r and 2r+1)."""
        u1 = self.uniform(2 * round_)
        u2 = self.uniform(2 * round_ + 1)
        return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
