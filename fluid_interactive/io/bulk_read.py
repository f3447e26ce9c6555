"""Fast bulk decoding of RecordIO files: `read_columns`.

`read_columns` reads a file in large pieces and decodes the runs of uncompressed chunks
that share one layout with a few NumPy calls per piece, not per chunk: a reading thread
beside a training loop must win the GIL back from the loop after every call that
releases it (a read, a CRC, a large NumPy operation), and every such hand-off costs the
loop time. Anything unusual in a run (compression, mixed layouts, any check failing) goes
chunk by chunk through the code of `read_chunks`, so the errors are the same.
"""
from __future__ import annotations

import contextlib
import functools
import os
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from .recordio import (
    _U32,
    HEADER,
    ChunkInfo,
    Run,
    _check_room,
    _copy_columns,
    _matching,
    _native_copies,
    _parse_header,
    _payload,
    _runs,
    _Where,
    open_regular,
)
from .tensor_codec import RecordLayout, TensorFormatError, parse_record

__all__ = ["read_columns"]


_PIECE = 16 << 20      # bytes per read, at most: the first read is 1 MB, each next twice
_FIRST_PIECE = 1 << 20  # as large (a fast first batch)
_CRC_POLY = 0xEDB88320  # the CRC-32 polynomial, bit-reflected as zlib uses it (bit 31: x^0)
_FEW_CHUNKS = 8        # below this many chunks in a run, CRC each payload on its own
_HELP_BYTES = 1 << 20  # runs this large have their CRCs computed on the helper thread


def _gf2_times(a: int, b: int) -> int:
    """a(x) * b(x) modulo the CRC-32 polynomial, both bit-reflected."""
    product = 0
    for i in range(32):
        if a >> (31 - i) & 1:  # a has the term x^i: add b * x^i
            product ^= b
        b = (b >> 1) ^ _CRC_POLY if b & 1 else b >> 1  # b * x, reduced
    return product


@functools.lru_cache(maxsize=16)
def _crc_skip(n: int) -> tuple[list[int], ...]:
    """Byte tables of the linear map ``skip`` with crc32(a + b) == skip(crc32(a)) ^
    crc32(b) for every b of n bytes (zlib's crc32_combine): a CRC times x^(8n)."""
    power, factor, e = 1 << 31, 1 << 30, 8 * n  # x^0 and x^1; square and multiply
    while e:
        if e & 1:
            power = _gf2_times(power, factor)
        factor, e = _gf2_times(factor, factor), e >> 1
    bits = [_gf2_times(power, 1 << i) for i in range(32)]  # the map is linear: per bit
    tables = []
    for byte in range(4):
        table = [0] * 256
        for v in range(1, 256):
            low = v & -v
            table[v] = table[v ^ low] ^ bits[8 * byte + low.bit_length() - 1]
        tables.append(table)
    return tuple(tables)


def _crc_if_claims_hold(view: memoryview, count: int, stored: int, claimed: list[int]) -> int:
    """The CRC-32 of ``count`` consecutive chunks of ``stored`` payload bytes (``view``:
    their bytes, headers included) if every payload has the CRC its header claims: the
    CRC continued over each header, then skipped over the payload (`_crc_skip`) and
    combined with the claim."""
    span = HEADER.size + stored
    t0, t1, t2, t3 = _crc_skip(stored)
    crc = 0
    for i in range(count):
        crc = zlib.crc32(view[i * span:i * span + HEADER.size], crc)
        crc = t0[crc & 255] ^ t1[crc >> 8 & 255] ^ t2[crc >> 16 & 255] ^ t3[crc >> 24] \
            ^ claimed[i]
    return crc


class _Background:
    """A helper thread of `read_columns`, started on first use. It reads the next piece of
    the file and computes CRC-32s (both release the GIL) while the reading thread checks
    the layouts and copies the columns of the current piece: two cores at work, and fewer
    calls for the reading thread to win the GIL back after, beside a training loop."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """Run ``fn(*args)`` there, after the jobs before it; returns a function that waits
        for the result (or raises the exception). Call it exactly once."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, daemon=True,
                                            name="fluid-recordio-helper")
            self._thread.start()
        out: queue.SimpleQueue = queue.SimpleQueue()
        self._jobs.put((fn, args, out))

        def result() -> Any:
            ok, value = out.get()
            if not ok:
                raise value
            return value
        return result

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, out = job
            try:
                out.put((True, fn(*args)))
            except BaseException as exc:  # reaches whoever waits for the result
                out.put((False, exc))

    def close(self) -> None:
        """Finish the jobs queued and stop the thread."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None


class _Checks:
    """CRC checks for `read_columns`, on the `_Background` thread for runs of at least
    `_HELP_BYTES`. Fewer than `_FEW_CHUNKS` chunks: one zlib.crc32 per payload. More: one
    zlib.crc32 over all of them (one call to win the GIL back after, not one per chunk),
    compared with `_crc_if_claims_hold`. A wrong payload in one chunk always changes that
    CRC; wrong payloads in several chunks of one run cancel out with probability 2^-32, the
    odds of a random corruption fooling one CRC-32."""

    def __init__(self, background: _Background):
        self.background = background

    def start(self, chunks: np.ndarray, count: int, stored: int, claimed: list[int]
              ) -> Callable[[], bool]:
        """Start checking; the returned function tells whether every claim holds."""
        view, span = chunks.data.cast("B"), HEADER.size + stored
        if count < _FEW_CHUNKS:
            def each() -> bool:
                return all(zlib.crc32(view[i * span + HEADER.size:(i + 1) * span])
                           == claimed[i] for i in range(count))
            return self.background.submit(each) if count * stored >= _HELP_BYTES else each
        actual = self.background.submit(zlib.crc32, view[:count * span])
        expected = _crc_if_claims_hold(view, count, stored, claimed)
        return lambda: actual() == expected


def _read_into(f: BinaryIO, view: memoryview, offset: int) -> int:
    """Fill ``view`` from byte ``offset`` of ``f``; fewer bytes only at the end of the file.
    Positional (os.preadv) where the OS has it, so that another thread may read too."""
    got = 0
    while got < len(view):
        if _PREADV:
            more = os.preadv(f.fileno(), [view[got:]], offset + got)
        else:
            f.seek(offset + got)
            more = f.readinto(view[got:])  # type: ignore[attr-defined]  # (not in BinaryIO's stub)
        if not more:
            break
        got += more
    return got


_PREADV = hasattr(os, "preadv")


class _Window:
    """Bytes of an open file (unbuffered), read a large piece at a time into one of two
    reused buffers; `read_ahead` reads the next piece into the other on the `_Background`
    thread (where os.preadv exists). Pieces grow from `_FIRST_PIECE` to `_PIECE` bytes:
    small for a fast first batch, then large, since each piece costs a few hand-offs of the
    GIL between a reading thread and its caller."""

    def __init__(self, f: BinaryIO, size: int, background: _Background):
        self.f, self.size, self.background = f, size, background
        self.buf = self.spare = np.empty(0, dtype=np.uint8)
        self.start = self.stop = 0
        self.piece = min(_FIRST_PIECE, _PIECE)
        self.unit = 1
        self.ahead: tuple[int, np.ndarray, Callable[[], int]] | None = None

    def at(self, offset: int, n: int, unit: int = 1) -> np.ndarray:
        """The held bytes from ``offset`` on: at least ``n`` unless the file shrank. A new
        piece is a whole number of ``unit`` bytes where the file allows, so that a run of
        chunks of one size is not cut."""
        if offset < self.start or offset + n > self.stop:
            self.unit = unit
            self._move(offset, n)
        return self.buf[offset - self.start:self.stop - self.start]

    def read_ahead(self) -> None:
        """Start reading the piece after the one held, unless it is read already."""
        start = self.stop
        if self.ahead is not None or start >= self.size or not _PREADV:
            return
        want = self._want(start, 0)
        if len(self.spare) < want:
            self.spare = np.empty(want, dtype=np.uint8)
        buf = self.spare
        self.ahead = (start, buf, self.background.submit(
            _read_into, self.f, buf.data[:want], start))

    def _want(self, offset: int, n: int) -> int:
        rest, piece = self.size - offset, self.piece
        self.piece = min(2 * piece, _PIECE)
        return max(n, rest if rest <= piece else piece // self.unit * self.unit)

    def _move(self, offset: int, n: int) -> None:
        if self.ahead is not None:
            start, buf, wait = self.ahead
            self.ahead = None
            got = wait()  # the helper is done with the spare buffer either way
            if start <= offset and offset + n <= start + got:
                self.buf, self.spare = buf, self.buf
                self.start, self.stop = start, start + got
                return
        want = self._want(offset, n)
        if len(self.buf) < want:
            self.buf = np.empty(want, dtype=np.uint8)
        got = _read_into(self.f, self.buf.data[:want], offset)
        self.start, self.stop = offset, offset + got  # short: the file shrank


def _same_headers(held: np.ndarray, info: ChunkInfo, limit: int) -> tuple[int, bool]:
    """(k, cut): the first k chunks of ``held`` (at most ``limit``) lie back to back with the
    header of ``info`` but for the CRC (magic, record count, compressor, stored size); cut
    when a chunk with another header ended them, not the end of ``held`` or the limit."""
    span = HEADER.size + info.stored_size
    k = min(len(held) // span, limit)
    heads = held[:k * span].reshape(k, span)[:, :HEADER.size].view("<u4")
    same = (heads[:, :2] == heads[0, :2]).all(axis=1) & (heads[:, 3:] == heads[0, 3:]).all(
        axis=1)
    return (k, False) if same.all() else (int(same.argmin()), True)


def _first_layout(held: np.ndarray, info: ChunkInfo) -> RecordLayout | None:
    """The layout of the first record of the chunk at the start of ``held`` when every
    record could share it (count x row size == stored size), else None."""
    payload = held.data.cast("B")[HEADER.size:HEADER.size + info.stored_size]
    if len(payload) < 4:
        return None
    (length,) = _U32.unpack_from(payload, 0)
    if (4 + length) * info.num_records != info.stored_size:
        return None
    try:
        return parse_record(payload, 4, 4 + length)
    except TensorFormatError:
        return None


def _fast_run(win: _Window, info: ChunkInfo, first: int, limit: int, checks: _Checks
              ) -> tuple[Run | None, int, bool]:
    """(run, k, cut): the k chunks from ``info`` on (at most ``limit``) that are
    uncompressed, share its header and its first record's layout, and pass their CRCs, as
    one run of fresh columns; cut as in `_same_headers` (or by another layout). With run
    None, decode the next max(k, 1) chunks one by one instead."""
    span = HEADER.size + info.stored_size
    held = win.at(info.offset, span, unit=span)
    layout = None if info.compressor or len(held) < span else _first_layout(held, info)
    if layout is None:
        return None, 0, True
    k, cut = _same_headers(held, info, limit)
    chunks = held[:k * span].reshape(k, span)
    win.read_ahead()
    crcs_hold = checks.start(held[:k * span], k, info.stored_size,
                             chunks[:, 8:12].view("<u4").ravel().tolist())
    rows = chunks[:, HEADER.size:].reshape(k, info.num_records, 4 + layout.length)
    ok = _matching(rows, layout)
    if ok[0] and not ok.all():  # a run of the first chunks; the CRCs of all k cover them
        k, cut = int(ok.argmin()), True
    columns = _copy_columns(rows[:k], layout) if ok[0] else ()
    crc_ok = crcs_hold()  # always wait: the CRC thread reads the window
    if not ok[0]:
        return None, 0, True
    if not crc_ok:
        return None, k, True  # the careful path names the chunk and the byte
    return Run(first, k * info.num_records, columns), k, cut


def read_columns(path: str | os.PathLike) -> Iterator[Run]:
    """Every record of the file, as runs of fresh, C-contiguous, writable columns in native
    byte order (the caller owns them). Consecutive uncompressed chunks of one record layout
    come as one run, decoded up to 16 MB at a time with a few NumPy calls while a helper
    thread reads the next piece and computes CRCs; other chunks come one run per layout per
    chunk. Checks and errors are those of `read_chunks`."""
    path = os.fspath(path)
    background = _Background()
    with open_regular(path, buffering=0) as f, contextlib.closing(background):
        size = os.fstat(f.fileno()).st_size
        win, checks = _Window(f, size, background), _Checks(background)
        offset = first = careful = 0  # careful: chunks left to decode one by one
        limit, span = size, 1  # limit: chunks the next fast run may take
        while offset < size:
            _check_room(path, offset, size)
            info = _parse_header(win.at(offset, HEADER.size, unit=span), path, offset, size)
            span = HEADER.size + info.stored_size
            if not careful:
                run, k, cut = _fast_run(win, info, first, limit, checks)
                # A run cut short checked chunks it did not take: bounding the next run by
                # twice this one keeps a file of alternating layouts linear, and doubling
                # after each uncut run lets long runs grow back quickly.
                limit = 2 * max(k, 1) if cut else min(2 * limit, size)
                if run is not None:
                    yield run
                    offset, first = offset + k * span, first + run.num_records
                    continue
                careful = max(k, 1)
            yield from _careful_runs(win, info, path, first)
            offset, first, careful = info.end, first + info.num_records, careful - 1


def _careful_runs(win: _Window, info: ChunkInfo, path: str, first: int) -> Iterator[Run]:
    """One chunk through the code of `read_chunks`, its columns copied out of the window."""
    stored = bytes(win.at(info.offset + HEADER.size, info.stored_size)[:info.stored_size])
    win.read_ahead()
    payload = _payload(stored, info, path)
    for run in _runs(payload, info, _Where(path, info), first):
        yield Run(run.first_record, run.num_records, _native_copies(run.columns))
