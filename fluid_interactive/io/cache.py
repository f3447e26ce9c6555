"""Keeping a small dataset in memory after its first pass (as ``tf.data``'s cache does).

`CachedSource` wraps a `FileSource`. Its first pass reads the files as usual and keeps the
decoded blocks, as long as they fit ``budget`` bytes; every later pass (the next epoch, or
the first after `BatchReader.reset`) serves those blocks from memory, so training pays for
decoding once. The kept blocks are handed on as not owned, so their batches are copies
(one copy per run of batches): a caller that writes into a batch never changes the cache. The cache is dropped when the files change (another expansion of the
globs, or a file's size or modification time), and never kept for data over the budget.
"""
from __future__ import annotations

import os
from typing import Any, Iterator, Optional

from .reader import Block, FileSource

DEFAULT_BUDGET = 256 << 20   # bytes of decoded data kept in memory per reader


def _stamp(paths: list[str]) -> tuple:
    out = []
    for p in paths:
        st = os.stat(p)
        out.append((p, st.st_size, st.st_mtime_ns))
    return tuple(out)


class _Store:
    """The kept blocks, shared by a `CachedSource` and what it resolves to."""

    __slots__ = ("stamp", "blocks", "too_big")

    def __init__(self) -> None:
        self.stamp: Optional[tuple] = None
        self.blocks: Optional[list[Block]] = None
        self.too_big = False


class CachedSource:
    """``source`` (a `FileSource`), decoded once while it fits ``budget`` bytes."""

    def __init__(self, source: FileSource, budget: int = DEFAULT_BUDGET,
                 _store: Optional[_Store] = None):
        self.source, self.budget = source, int(budget)
        self._store = _store if _store is not None else _Store()

    @property
    def cached(self) -> bool:
        """Whether a whole pass is kept in memory."""
        return self._store.blocks is not None

    def resolved(self) -> "CachedSource":
        inner = self.source.resolved()
        stamp = _stamp(inner.paths)
        store = self._store
        if stamp != store.stamp:   # other files, or changed ones: start over
            store.stamp, store.blocks, store.too_big = stamp, None, False
        return CachedSource(inner, self.budget, store)

    def blocks(self) -> Iterator[Block]:
        store = self._store
        if store.blocks is not None:
            for block in store.blocks:
                yield block._replace(owned=False)
            return
        kept: Optional[list[Block]] = None if store.too_big else []
        size = 0
        for block in self.source.blocks():
            if kept is not None:
                size += sum(c.nbytes for c in block.columns)
                if size > self.budget:
                    kept, store.too_big = None, True
                else:
                    kept.append(block)
                    block = block._replace(owned=False)   # batches: copies, not views
            yield block
        if kept is not None:   # a whole pass within the budget
            store.blocks = kept

    def __repr__(self) -> str:
        return repr(self.source)

    def __getattr__(self, name: str) -> Any:   # paths, patterns: the file source's
        return getattr(self.source, name)
