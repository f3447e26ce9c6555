"""`TableStore`: every table shard of one parameter server, and the step that updates them
(see table_store.py for a shard's rows).

A shard's update feeds its optimize block (passes/transpiler/pserver.py `_table_block`)
the arriving gradient rows laid out as dense rows, then the rows of each var they update,
and takes back the new rows. Row counts are rounded up to a power of two (at least 16;
the padding rows get a zero gradient and are dropped), so a block is planned once per
size class rather than once per batch.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..passes.transpiler import PServerInfo, TableBlock
from .table_store import ShardRows, TableDelta, TableRows

#: Prefix of a shard's arrays in a server's state files.
TABLE_PREFIX = "@TABLE@"


def _bucket(n: int) -> int:
    return max(16, 1 << max(n - 1, 0).bit_length())


def _pad(rows: np.ndarray, size: int, fill: np.ndarray | None = None) -> np.ndarray:
    if rows.shape[0] == size:
        return rows
    out = np.zeros((size,) + rows.shape[1:], dtype=rows.dtype)
    out[:rows.shape[0]] = rows
    if fill is not None:
        out[rows.shape[0]:] = fill
    return out


class TableStore:
    """The table shards of one server and their update blocks."""

    def __init__(self, info: PServerInfo, seed: int | None, runners: Mapping[int, Any]):
        self.shards = {s.name: ShardRows(s, seed) for s in info.tables}
        self.blocks = list(info.table_blocks)
        self._runners = runners
        self._row_local: dict[int, bool] = {}

    def feeds(self) -> set[str]:
        return {f for b in self.blocks for f in b.arrivals}

    def read(self, names: Sequence[str], ids: Sequence[np.ndarray], grow: bool,
             when: str) -> list[np.ndarray]:
        out = []
        for name, i in zip(names, ids):
            shard = self.shards.get(name)
            if shard is None:
                raise KeyError(f"no table shard {name!r} here; this server holds: "
                               f"{', '.join(self.shards) or 'none'}")
            out.append(shard.read(np.asarray(i, dtype=np.int64).reshape(-1), grow, when))
        return out

    # --- a step -------------------------------------------------------------------------------

    def step(self, arrived: Mapping[str, Any], values: dict[str, Any], when: str
             ) -> list[TableDelta]:
        """Run the update of every shard with arrivals; ``values`` (the server's other
        state, a fresh dict) takes the writes of the one-element accumulators."""
        return [self._step(b, arrived, values, when) for b in self.blocks
                if any(f in arrived for f in b.arrivals)]

    def _step(self, b: TableBlock, arrived: Mapping[str, Any], values: dict[str, Any],
              when: str) -> TableDelta:
        shard = self.shards[b.shard]
        grads = [arrived[f] for f in b.arrivals if isinstance(arrived[f], TableRows)]
        batch = np.unique(np.concatenate([g.ids for g in grads])) if grads else \
            np.zeros(0, np.int64)
        slots = shard.map.lookup(batch)
        new = batch[slots < 0]
        shard.check_room(new.size, int(new[0]) if new.size else None, when)
        compact = self._compact(b, shard, values, arrived)
        if compact:
            order, order_slots = batch, slots
        else:   # every live row, in slot order, then the new ones
            order = np.concatenate([shard.ids[:shard.size], new])
            order_slots = np.concatenate([np.arange(shard.size), np.full(new.size, -1)])
        size = shard.size

        def position(ids: np.ndarray) -> np.ndarray:
            if compact:
                return np.searchsorted(batch, ids)
            s = shard.map.lookup(ids)
            return np.where(s >= 0, s, size + np.searchsorted(new, ids))
        rows = shard.gather(order, order_slots)
        out = self._run(b, shard, arrived, values, rows, position, _bucket(order.size))
        return TableDelta(shard.spec.name, new, order,
                          {local: o[:order.size] for (_, local), o in zip(b.rows, out)})

    def _run(self, b: TableBlock, shard: ShardRows, arrived: Mapping[str, Any],
             values: dict[str, Any], rows: dict[str, np.ndarray], position: Any,
             size: int) -> list[np.ndarray]:
        feeds = []
        for f in b.arrivals:
            v = arrived[f]
            if isinstance(v, TableRows):
                dense = np.zeros((size, shard.spec.dim), dtype=shard.spec.dtype)
                dense[position(np.asarray(v.ids, np.int64))] = v.values
                v = dense
            feeds.append(v)
        for _, local in b.rows:
            have = rows[local].shape[0]
            fill = shard.init_rows(local, np.zeros(size - have, np.int64)) if size > have \
                else None
            feeds.append(_pad(rows[local], size, fill))
        out = self._runners[b.block_idx].run(values, feeds)
        out = out if isinstance(out, tuple) else (out,)
        return [np.asarray(o) for o in out]

    def _compact(self, b: TableBlock, shard: ShardRows, values: dict[str, Any],
                 arrived: Mapping[str, Any]) -> bool:
        """Whether the update may read the batch's rows only: it asks to (lazy), or a zero
        gradient leaves a row as it is, measured once on probe rows."""
        if b.lazy:
            return True
        known = self._row_local.get(b.block_idx)
        if known is None:
            known = self._row_local[b.block_idx] = self._probe(b, shard, values, arrived)
        return known

    def _probe(self, b: TableBlock, shard: ShardRows, values: dict[str, Any],
               arrived: Mapping[str, Any]) -> bool:
        rng = np.random.default_rng(0)
        size, dim, dtype = 16, shard.spec.dim, shard.spec.dtype
        rows = {local: (rng.standard_normal((size, dim)) if k == 0 else
                        0.5 + rng.uniform(size=(size, dim))).astype(dtype)
                for k, (_, local) in enumerate(b.rows)}
        scratch = dict(values)
        # zero gradients, and the side values (a fed learning rate) as they arrived
        feeds = [np.zeros((size, dim), dtype) if isinstance(arrived[f], TableRows)
                 else arrived[f] for f in b.arrivals]
        feeds += [rows[local] for _, local in b.rows]
        out = self._runners[b.block_idx].run(scratch, feeds)
        out = out if isinstance(out, tuple) else (out,)
        return all(np.array_equal(np.asarray(o), rows[local])
                   for o, (_, local) in zip(out, b.rows))

    def commit(self, deltas: Sequence[TableDelta]) -> None:
        for d in deltas:
            self.shards[d.shard].apply(d)

    # --- state files and checkpoints ----------------------------------------------------------

    def snapshot(self, deltas: Sequence[TableDelta] = ()) -> dict[str, np.ndarray]:
        """Every shard's live rows as named arrays (a state file's), after ``deltas``."""
        pending = {d.shard: d for d in deltas}
        out = {}
        for name, shard in self.shards.items():
            if name in pending:
                shard = shard.copy()
                shard.apply(pending[name])
            ids, rows = shard.live()
            out[f"{TABLE_PREFIX}{name}|ids"] = ids
            out.update({f"{TABLE_PREFIX}{name}|{k}": v for k, v in rows.items()})
        return out

    def restore(self, arrays: Mapping[str, np.ndarray]) -> None:
        for name, shard in self.shards.items():
            ids = arrays.get(f"{TABLE_PREFIX}{name}|ids")
            if ids is not None:
                shard.load(ids, {k: arrays[f"{TABLE_PREFIX}{name}|{k}"]
                                 for k in shard.arrays})


def split_tables(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ordinary state, the table shards' arrays) of a state file's values."""
    plain = {k: v for k, v in values.items() if not k.startswith(TABLE_PREFIX)}
    tables = {k: v for k, v in values.items() if k.startswith(TABLE_PREFIX)}
    return plain, tables
