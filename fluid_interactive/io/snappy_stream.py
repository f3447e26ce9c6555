"""The snappystream framing Paddle Fluid used for compressor 1 (hoxnox/snappystream 0.2.8,
the Java "dain/snappy" stream format; *not* Google's official framing format).

A stream is the 7-byte magic ``b"snappy\\0"`` followed by blocks::

    uint8   flag              1 = snappy-compressed, 0 = stored raw
    uint16  length            big-endian: bytes of data that follow
    uint32  checksum          big-endian: masked CRC-32C of the *uncompressed* block
    bytes   data

Each block covers at most 32 KiB of input; a block is stored raw when snappy saves less
than 12.5 %. The masked CRC is ``((crc >> 15) | (crc << 17)) + 0xa282ead8`` (mod 2**32).

The block codec itself (raw snappy) comes from the optional ``python-snappy`` package;
`recordio` passes it in. Framing, checksums and raw blocks need no codec.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import Protocol

import numpy as np

MAGIC = b"snappy\x00"
BLOCK_SIZE = 1 << 15
_BLOCK = struct.Struct(">BHI")


class BlockCodec(Protocol):
    def compress(self, data: bytes) -> bytes: ...
    def decompress(self, data: bytes) -> bytes: ...


class SnappyStreamError(ValueError):
    """Malformed stream; ``offset`` is the position of the bad field in the stream."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


class CodecUnavailable(SnappyStreamError):
    """The stream has a compressed block and no snappy codec was given."""


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def _advance(register: int, data: bytes) -> int:
    """The raw CRC-32C register after ``data`` (no pre- or post-conditioning)."""
    table = _TABLE
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


_LANE = 128  # bytes per lane of the vectorised CRC


@lru_cache(maxsize=1)
def _lane_tables() -> tuple[np.ndarray, list[list[int]]]:
    """The byte table as an array, and four tables that advance a register over _LANE
    zero bytes, one per byte of the register (the advance is linear over GF(2))."""
    basis = [_advance(1 << bit, bytes(_LANE)) for bit in range(32)]
    shift = []
    for k in range(4):
        table = []
        for value in range(256):
            out = 0
            for bit in range(8):
                if value >> bit & 1:
                    out ^= basis[8 * k + bit]
            table.append(out)
        shift.append(table)
    return np.array(_TABLE, dtype=np.uint32), shift


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as in iSCSI and snappy. Long inputs run as parallel lanes of
    128 bytes in NumPy, combined through the linearity of the CRC."""
    lanes = len(data) // _LANE
    if lanes < 16:
        return _advance(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    table, (s0, s1, s2, s3) = _lane_tables()
    cols = np.frombuffer(data, dtype=np.uint8, count=lanes * _LANE).reshape(lanes, _LANE)
    cols = np.ascontiguousarray(cols.T, dtype=np.uint32)
    reg = np.zeros(lanes, dtype=np.uint32)
    for k in range(_LANE):  # each lane from a zero register: its own contribution
        reg = table[(reg ^ cols[k]) & 0xFF] ^ (reg >> 8)
    register = 0xFFFFFFFF
    for lane in reg.tolist():
        register = (s0[register & 0xFF] ^ s1[(register >> 8) & 0xFF]
                    ^ s2[(register >> 16) & 0xFF] ^ s3[register >> 24] ^ lane)
    return _advance(register, data[lanes * _LANE:]) ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def compress(data: bytes, codec: BlockCodec) -> bytes:
    """Frame ``data`` as snappystream does: magic, then one block per 32 KiB of input."""
    out = [MAGIC]
    view = memoryview(data)
    for start in range(0, len(data), BLOCK_SIZE):
        block = bytes(view[start:start + BLOCK_SIZE])
        packed = codec.compress(block)
        if len(packed) >= len(block) - len(block) // 8:  # saves < 12.5 %: store raw
            out += [_BLOCK.pack(0, len(block), masked_crc32c(block)), block]
        else:
            out += [_BLOCK.pack(1, len(packed), masked_crc32c(block)), packed]
    return b"".join(out)


def decompress(stream: bytes, codec: BlockCodec | None, limit: int | None = None) -> bytes:
    """Undo `compress`. Checks the magic, every block's bounds and checksum; a compressed
    block with ``codec=None`` raises `CodecUnavailable`; more than ``limit`` bytes of
    output raise `SnappyStreamError`."""
    if stream[:len(MAGIC)] != MAGIC:
        raise SnappyStreamError(f"snappy stream magic {stream[:7]!r} is not {MAGIC!r}", 0)
    out = []
    pos, total = len(MAGIC), 0
    while pos < len(stream):
        if len(stream) - pos < _BLOCK.size:
            raise SnappyStreamError(
                f"snappy block header needs {_BLOCK.size} bytes, {len(stream) - pos} remain", pos)
        flag, length, checksum = _BLOCK.unpack_from(stream, pos)
        data_at = pos + _BLOCK.size
        if flag not in (0, 1):
            raise SnappyStreamError(f"snappy block flag {flag} is neither 0 nor 1", pos)
        if length == 0 or length > len(stream) - data_at:
            raise SnappyStreamError(
                f"snappy block length {length} does not fit the {len(stream) - data_at} bytes "
                "left", pos + 1)
        data = stream[data_at:data_at + length]
        if flag == 1:
            if codec is None:
                raise CodecUnavailable("snappy block needs the python-snappy package", pos)
            try:
                data = codec.decompress(data)
            except Exception as exc:  # the codec's own error types vary by version
                raise SnappyStreamError(f"snappy block does not decompress: {exc}", pos) from exc
        total += len(data)
        if limit is not None and total > limit:
            raise SnappyStreamError(f"snappy stream inflates beyond {limit} bytes", pos)
        if masked_crc32c(data) != checksum:
            raise SnappyStreamError("snappy block checksum (masked CRC-32C) mismatch", pos + 3)
        out.append(data)
        pos = data_at + length
    return b"".join(out)
