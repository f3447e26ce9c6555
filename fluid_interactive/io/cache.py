"""Keeping a small dataset in memory after its first pass (as ``tf.data``'s cache does).

`CachedSource` wraps a `FileSource`. Its first pass reads the files as usual and keeps the
decoded blocks, as long as they fit ``budget`` bytes; every later pass (the next epoch, or
the first after `BatchReader.reset`) serves those blocks from memory, so training pays for
decoding once. The kept arrays are made read-only and the pipeline's batches are views of
them, in the first epoch and in every later one: no copy, a reshape per run of batches,
and the reading thread hands whole blocks over at once. `BatchReader.take` (what a
compiled method reads its batches with: kernels never write into their inputs) hands
those views out; `BatchReader.next` copies them, so its caller still gets arrays of its
own to write into. The cache is dropped when the files change (another expansion of the
globs, or a file's size or modification time), and never kept for data over the budget.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from .sources import Block, FileSource

DEFAULT_BUDGET = 256 << 20   # bytes of decoded data kept in memory per reader


def _stamp(paths: list[str]) -> tuple:
    out = []
    for p in paths:
        st = os.stat(p)
        out.append((p, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _frozen(block: Block) -> Block:
    """``block`` with read-only columns that may be handed out as views (owned)."""
    for column in block.columns:
        column.flags.writeable = False
    return block._replace(owned=True)


class _Store:
    """The kept blocks, shared by a `CachedSource` and what it resolves to."""

    __slots__ = ("stamp", "blocks", "too_big")

    def __init__(self) -> None:
        self.stamp: tuple | None = None
        self.blocks: list[Block] | None = None
        self.too_big = False


class CachedSource:
    """``source`` (a `FileSource`), decoded once while it fits ``budget`` bytes."""

    def __init__(self, source: FileSource, budget: int = DEFAULT_BUDGET,
                 _store: _Store | None = None):
        self.source, self.budget = source, int(budget)
        self._store = _store if _store is not None else _Store()

    @property
    def cached(self) -> bool:
        """Whether a whole pass is kept in memory."""
        return self._store.blocks is not None

    def resolved(self) -> CachedSource:
        inner = self.source.resolved()
        stamp = _stamp(inner.paths)
        store = self._store
        if stamp != store.stamp:   # other files, or changed ones: start over
            store.stamp, store.blocks, store.too_big = stamp, None, False
        return CachedSource(inner, self.budget, store)

    def blocks(self) -> Iterator[Block]:
        store = self._store
        if store.blocks is not None:
            yield from store.blocks
            return
        kept: list[Block] | None = None if store.too_big else []
        size = 0
        for block in self.source.blocks():
            if kept is not None:
                size += sum(c.nbytes for c in block.columns)
                if size > self.budget:
                    kept, store.too_big = None, True
                else:
                    block = _frozen(block)   # batches: read-only views, in every epoch
                    kept.append(block)
            yield block
        if kept is not None:   # a whole pass within the budget
            store.blocks = kept

    def __repr__(self) -> str:
        return repr(self.source)

    def __getattr__(self, name: str) -> Any:   # paths, patterns: the file source's
        return getattr(self.source, name)
