"""Where a batch reader's samples come from: a source is any object with ``resolved()``
(the source to read from now on) and ``blocks()`` (an iterator of `Block`, one pass over
the data): samples in memory (`ArraySource`) or RecordIO files (`FileSource`)."""
from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import ReaderError
from .bulk_read import read_columns


class Block(NamedTuple):
    """A run of samples as columns. A source is any object with ``resolved()`` (the
    source to read from now on: `FileSource` fixes its glob expansion) and ``blocks()``
    (an iterator of these, one pass over the data)."""
    origin: str                       # a file path, or "<arrays>"
    first_record: int                 # index of the block's first record in its origin
    columns: tuple[np.ndarray, ...]   # one per tensor, leading sample dim
    owned: bool                       # fresh arrays no one else sees: may be handed out


class ArraySource:
    """In-memory samples: ``(X, Y, ...)`` with a shared leading sample dim (or one array)."""

    origin = "<arrays>"

    def __init__(self, arrays: Any):
        columns = (np.asarray(arrays),) if isinstance(arrays, np.ndarray) else tuple(
            np.asarray(a) for a in arrays)
        if not columns or any(c.ndim == 0 for c in columns):
            raise ReaderError("ArraySource takes a tuple of arrays with a leading sample "
                              "dimension, e.g. ArraySource((X, Y))")
        if len({len(c) for c in columns}) != 1:
            raise ReaderError(f"ArraySource arrays hold different numbers of samples: "
                              f"{[c.shape for c in columns]}")
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[0])

    def resolved(self) -> ArraySource:
        return self

    def blocks(self) -> Iterator[Block]:
        yield Block(self.origin, 0, self.columns, False)

    def __repr__(self) -> str:
        return f"ArraySource({', '.join(f'{c.dtype}{list(c.shape)}' for c in self.columns)})"


def _expand(pattern: str) -> list[str]:
    if os.path.exists(pattern):
        return [pattern]
    if any(ch in pattern for ch in "*?["):
        found = sorted(glob.glob(pattern))
        if not found:
            raise ReaderError(f"no RecordIO file matches {pattern!r}")
        return found
    raise ReaderError(f"RecordIO file {pattern!r} does not exist")


class FileSource:
    """RecordIO files: a path, a glob, or a list of paths and globs. Each glob expands to
    its matches in sorted order; a list keeps its own order. Expansion happens when
    reading starts (and again after `BatchReader.reset`), so files may be written after
    the reader is created."""

    def __init__(self, paths: str | os.PathLike | Sequence[str | os.PathLike]):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.patterns = [os.fspath(p) for p in paths]
        if not self.patterns:
            raise ReaderError("FileSource needs at least one path")

    @property
    def paths(self) -> list[str]:
        """The files, expanded now; `ReaderError` when a pattern matches nothing."""
        return [p for pattern in self.patterns for p in _expand(pattern)]

    def resolved(self) -> FileSource:
        """A source over today's expansion, so every epoch reads the same files."""
        return FileSource(self.paths)

    def blocks(self) -> Iterator[Block]:
        for path in self.paths:
            for run in read_columns(path):
                yield Block(path, run.first_record, run.columns, True)

    def __repr__(self) -> str:
        return f"FileSource({self.patterns!r})"
