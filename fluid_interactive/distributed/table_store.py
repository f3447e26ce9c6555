"""The table shards of one parameter server: rows made on first use, and their updates.

A shard (`ShardRows`) keeps the ids it has seen in an open-addressing hash map
(`IdMap`: int64 id -> slot, probed for a whole batch at once) and, per var (the table,
then each accumulator shaped like it), the rows at those slots, in arrays that double as
they fill, up to the shard's share of the capacity. A row that is read before it exists
reads its first value (`RowInit`: the initialiser drawn for that row alone, ops/row_random.py)
in a training method, and zeros in any other.

An update (`TableStore.step`) never changes the shard: it runs the shard's optimize block
on the rows it needs and returns a `TableDelta` (new ids, the rows written) that
`TableStore.commit` applies once the step commits, as the server's other state is.
Which rows an update needs: the batch's alone when a zero gradient leaves a row as it is
(SGD, Adagrad: measured once per block on probe rows, `_row_local`), or when the update
asks for that (Adam's ``lazy_mode``); otherwise every live row, as one process updates
every row of its table (Adam's and Momentum's moments decay on every row).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..ops.registry import get_spec
from ..ops.row_random import RowDraws, row_key
from ..passes.transpiler import RowInit, ServedShard
from .errors import DistributedError

_EMPTY = np.iinfo(np.int64).min
_M1 = np.uint64(0xBF58476D1CE4E5B9)


class TableFull(DistributedError):
    """A table shard holds as many rows as its share of the table's capacity (size[0])
    and a step brings an id it has never seen."""


@dataclass
class TableRows:
    """Rows of a table travelling between a trainer and a server: ``ids`` int64 [n] and
    ``values`` [n, dim] (a gradient's, or a table's)."""
    ids: np.ndarray
    values: np.ndarray


@dataclass
class TableDelta:
    """What a step writes in one shard: ``new_ids`` get slots after the live ones, then the
    rows of ``ids`` (in that order) become ``values`` (per var)."""
    shard: str
    new_ids: np.ndarray
    ids: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)


# --- the id map ---------------------------------------------------------------------------------

class IdMap:
    """int64 id -> slot, open addressing with linear probing, a batch at a time."""

    def __init__(self, size: int = 1024):
        self.keys = np.full(size, _EMPTY, dtype=np.int64)
        self.slots = np.zeros(size, dtype=np.int64)
        self.count = 0

    def _home(self, ids: np.ndarray) -> np.ndarray:
        mask = np.uint64(self.keys.size - 1)
        z = ids.view(np.uint64) * _M1
        return ((z ^ (z >> np.uint64(29))) & mask).astype(np.int64)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The slot of each id, -1 for ids not in the map."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        out = np.full(ids.size, -1, dtype=np.int64)
        pos = self._home(ids)
        todo = np.arange(ids.size)
        mask = self.keys.size - 1
        while todo.size:
            k = self.keys[pos[todo]]
            hit = k == ids[todo]
            out[todo[hit]] = self.slots[pos[todo[hit]]]
            todo = todo[~hit & (k != _EMPTY)]
            pos[todo] = (pos[todo] + 1) & mask
        return out

    def insert(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Add distinct ids that are not in the map yet."""
        if (self.count + ids.size) * 2 > self.keys.size:
            self._grow(self.count + ids.size)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        pos = self._home(ids)
        todo = np.arange(ids.size)
        mask = self.keys.size - 1
        while todo.size:
            p = pos[todo]
            free = self.keys[p] == _EMPTY
            taken, first = np.unique(p[free], return_index=True)
            winners = todo[free][first]
            self.keys[taken], self.slots[taken] = ids[winners], slots[winners]
            won = np.zeros(ids.size, dtype=bool)
            won[winners] = True
            todo = todo[~won[todo]]
            pos[todo] = (pos[todo] + 1) & mask
        self.count += ids.size

    def _grow(self, need: int) -> None:
        live = self.keys != _EMPTY
        keys, slots = self.keys[live], self.slots[live]
        size = self.keys.size
        while need * 2 > size:
            size *= 2
        self.keys = np.full(size, _EMPTY, dtype=np.int64)
        self.slots = np.zeros(size, dtype=np.int64)
        self.count = 0
        self.insert(keys, slots)


# --- one shard ----------------------------------------------------------------------------------

def first_rows(shards: Sequence[ServedShard], seed: int | None, ids: np.ndarray
               ) -> dict[str, np.ndarray]:
    """The first value of every var of a table (the table, its accumulators) at ``ids``,
    as the shards make them (`ShardRows`): by the original var's name."""
    spec = shards[0]
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    return {s.var: _init_rows(s, row_key(_seed_of(s, seed), s.var), ids,
                              spec.dim, spec.dtype) for s in spec.state}


def _seed_of(init: RowInit, seed: int | None) -> int | None:
    own = dict(init.attrs).get("seed")
    return own if isinstance(own, int) and own else seed


def _init_rows(init: RowInit, key: int, ids: np.ndarray, dim: int, dtype: str) -> np.ndarray:
    rows = get_spec(init.op_type).rows
    assert rows is not None   # checked by the transpiler (pserver.py, _row_init)
    draws = RowDraws(key, ids, dim)
    return np.asarray(rows(dict(init.attrs), draws), dtype=dtype).reshape(ids.size, dim)


class ShardRows:
    """The rows of one table shard (see the module docstring)."""

    def __init__(self, spec: ServedShard, seed: int | None):
        self.spec = spec
        self.map = IdMap()
        self.size = 0
        self.ids = np.zeros(0, dtype=np.int64)                   # slot -> id
        self.arrays = {s.local: np.zeros((0, spec.dim), spec.dtype) for s in spec.state}
        self._keys = {s.local: row_key(_seed_of(s, seed), s.var)
                      for s in spec.state}
        self._inits = {s.local: s for s in spec.state}

    @property
    def table_var(self) -> str:
        return self.spec.state[0].local

    def init_rows(self, local: str, ids: np.ndarray) -> np.ndarray:
        return _init_rows(self._inits[local], self._keys[local], ids, self.spec.dim,
                          self.spec.dtype)

    def check_room(self, new: int, example: int | None, when: str) -> None:
        if self.size + new <= self.spec.rows:
            return
        s = self.spec
        raise TableFull(
            f"table {s.table!r} is full on shard {s.index} of {s.count} ({s.name}): it holds "
            f"{self.size} of its {s.rows} rows (the table's capacity, size[0] = "
            f"{s.capacity}, over {s.count} shards) and {when} brings {new} id(s) it has "
            f"never seen (e.g. {example}); raise size[0] of the embedding, or hash the ids "
            f"into fewer buckets")

    def read(self, ids: np.ndarray, grow: bool, when: str) -> np.ndarray:
        """The table's rows of ``ids``: unknown ids read their first value when ``grow``
        (and must fit), else zeros."""
        slots = self.map.lookup(ids)
        known = slots >= 0
        out = np.zeros((ids.size, self.spec.dim), dtype=self.spec.dtype)
        out[known] = self.arrays[self.table_var][slots[known]]
        if grow and not known.all():
            unknown = ids[~known]
            self.check_room(unknown.size, int(unknown[0]), when)
            out[~known] = self.init_rows(self.table_var, unknown)
        return out

    def gather(self, ids: np.ndarray, slots: np.ndarray) -> dict[str, np.ndarray]:
        """Every var's rows of ``ids`` (slots -1: not made yet, their first values)."""
        known = slots >= 0
        out = {}
        for local, arr in self.arrays.items():
            rows = np.empty((ids.size, self.spec.dim), dtype=self.spec.dtype)
            rows[known] = arr[slots[known]]
            if not known.all():
                rows[~known] = self.init_rows(local, ids[~known])
            out[local] = rows
        return out

    def apply(self, delta: TableDelta) -> None:
        n = delta.new_ids.size
        if n:
            self._reserve(self.size + n)
            new_slots = np.arange(self.size, self.size + n, dtype=np.int64)
            self.map.insert(delta.new_ids, new_slots)
            self.ids[self.size:self.size + n] = delta.new_ids
            self.size += n
        slots = self.map.lookup(delta.ids)
        for local, rows in delta.values.items():
            self.arrays[local][slots] = rows

    def _reserve(self, need: int) -> None:
        have = self.ids.size
        if need <= have:
            return
        size = min(max(need, 2 * have, 64), max(self.spec.rows, need))
        self.ids = np.concatenate([self.ids, np.zeros(size - have, np.int64)])
        for local, arr in self.arrays.items():
            grown = np.zeros((size, self.spec.dim), dtype=arr.dtype)
            grown[:have] = arr
            self.arrays[local] = grown

    def live(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Copies of the live ids and of each var's rows, in slot order."""
        return self.ids[:self.size].copy(), {k: a[:self.size].copy()
                                             for k, a in self.arrays.items()}

    def load(self, ids: np.ndarray, rows: Mapping[str, np.ndarray]) -> None:
        """Replace the shard's rows by these (a checkpoint's, a restarted server's)."""
        ids = np.asarray(ids, dtype=np.int64)
        self.map, self.size = IdMap(), 0
        self.check_room(ids.size, int(ids[-1]) if ids.size else None, "loading")
        self.ids = np.zeros(0, dtype=np.int64)
        self.arrays = {k: np.zeros((0, self.spec.dim), self.spec.dtype) for k in self.arrays}
        self.apply(TableDelta(self.spec.name, ids, ids,
                              {k: np.asarray(rows[k], self.spec.dtype) for k in self.arrays}))

    def copy(self) -> ShardRows:
        """A shard holding the same rows (that its own updates leave this one as it is)."""
        other = ShardRows.__new__(ShardRows)
        other.spec, other._keys, other._inits = self.spec, self._keys, self._inits
        other.map, other.size = IdMap(), 0
        other.ids = np.zeros(0, dtype=np.int64)
        other.arrays = {k: np.zeros((0, self.spec.dim), self.spec.dtype) for k in self.arrays}
        ids, rows = self.live()
        other.load(ids, rows)
        return other

    def nbytes(self) -> int:
        return self.ids.nbytes + self.map.keys.nbytes * 2 + sum(
            a.nbytes for a in self.arrays.values())
