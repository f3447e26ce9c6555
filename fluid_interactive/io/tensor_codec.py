"""Paddle Fluid's LoDTensor serialisation, for dense tensors (LoD level 0).

One tensor, all integers little-endian::

    uint32  LoDTensor version      = 0
    uint64  number of LoD levels   = 0
    uint32  Tensor version         = 0
    int32   size of the TensorDesc
    bytes   TensorDesc (protobuf: field 1 data_type varint, field 2 dims, one varint each)
    bytes   the data: numel * itemsize bytes, row-major, little-endian

A RecordIO record is ``uint32 tensor count`` followed by that many tensors. This is the
byte format Paddle's ``SerializeToStream`` writes for RecordIO records and for the
``save``/``save_combine`` parameter files, so one codec serves both.

Everything here works on bytes in memory; file handling lives in `recordio`. Decoding
never trusts a length: every size is checked against the bytes that remain, and a
violation raises `TensorFormatError` with the offset of the offending field.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import DTypeError

# VarType.Type codes (framework.proto) that map to a NumPy dtype. BF16 (22) has none.
DTYPE_OF_CODE: dict[int, np.dtype] = {
    0: np.dtype("?"), 1: np.dtype("<i2"), 2: np.dtype("<i4"), 3: np.dtype("<i8"),
    4: np.dtype("<f2"), 5: np.dtype("<f4"), 6: np.dtype("<f8"), 19: np.dtype("<u8"),
    20: np.dtype("u1"), 21: np.dtype("i1"), 23: np.dtype("<c8"), 24: np.dtype("<c16"),
}
CODE_OF_DTYPE: dict[np.dtype, int] = {dt: code for code, dt in DTYPE_OF_CODE.items()}
CODE_NAMES = {0: "BOOL", 1: "INT16", 2: "INT32", 3: "INT64", 4: "FP16", 5: "FP32", 6: "FP64",
              19: "SIZE_T", 20: "UINT8", 21: "INT8", 22: "BF16", 23: "COMPLEX64",
              24: "COMPLEX128"}

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_PREFIX = struct.Struct("<IQIi")  # LoDTensor version, LoD levels, Tensor version, desc size
_MAX_DESC = 1 << 16  # a TensorDesc is a few dozen bytes; anything larger is corruption


_MAX_ELEMENTS = 1 << 48


class TensorFormatError(ValueError):
    """Malformed tensor bytes; ``offset`` is the position of the bad field in the buffer."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class TensorSpec:
    """Where one tensor's data sits inside a record, and what it is."""
    dtype: np.dtype
    shape: tuple[int, ...]
    data_offset: int  # from the start of the record
    nbytes: int


@dataclass(frozen=True)
class RecordLayout:
    """The parsed structure of one record: its length and the tensors' data regions. Two
    records with equal layouts can be read as rows of one strided table."""
    length: int
    tensors: tuple[TensorSpec, ...]


# ---------------------------------------------------------------- encoding

def little_endian(dtype: np.dtype) -> np.dtype:
    """The little-endian dtype that stores ``dtype``; `DTypeError` when no code exists."""
    dtype = np.dtype(dtype)
    le = dtype if dtype.byteorder == "|" else dtype.newbyteorder("<")
    if le not in CODE_OF_DTYPE:
        names = ", ".join(sorted({str(d.newbyteorder("=")) for d in CODE_OF_DTYPE}))
        raise DTypeError(f"RecordIO cannot store dtype {dtype}; supported: {names}")
    return le


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 two's complement, as protobuf writes negative int64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_tensor_desc(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The TensorDesc protobuf: ``08 <code>`` then ``10 <dim>`` per dim (unpacked)."""
    code = CODE_OF_DTYPE[little_endian(dtype)]
    return b"\x08" + _varint(code) + b"".join(b"\x10" + _varint(d) for d in shape)


def tensor_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """Every byte of a serialized tensor that precedes its data."""
    desc = encode_tensor_desc(dtype, shape)
    return _PREFIX.pack(0, 0, 0, len(desc)) + desc


def encode_tensor(array: np.ndarray) -> bytes:
    """One dense tensor in LoDTensor serialisation (LoD level 0)."""
    array = np.asarray(array)
    le = little_endian(array.dtype)
    data = np.ascontiguousarray(array, dtype=le)
    return tensor_header(le, array.shape) + data.tobytes()


def encode_record(arrays: tuple[np.ndarray, ...]) -> bytes:
    """``uint32 count`` + each tensor: the bytes of one RecordIO record."""
    return _U32.pack(len(arrays)) + b"".join(encode_tensor(a) for a in arrays)


# ---------------------------------------------------------------- decoding

def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise TensorFormatError("TensorDesc ends inside a varint", start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise TensorFormatError("TensorDesc varint longer than 10 bytes", start)


def _as_int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_tensor_desc(buf, pos: int, end: int) -> tuple[int, list[int]]:
    """(data_type code, dims) from TensorDesc bytes ``buf[pos:end]``. Accepts the packed
    encoding of dims too, and skips unknown fields as protobuf does."""
    code: int | None = None
    dims: list[int] = []
    while pos < end:
        key_at = pos
        key, pos = _read_varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos, end)
            if field == 1:
                code = value
            elif field == 2:
                dims.append(_as_int64(value))
        elif wire == 2:
            size, pos = _read_varint(buf, pos, end)
            if size > end - pos:
                raise TensorFormatError("TensorDesc field runs past its end", key_at)
            if field == 2:  # packed dims (proto3 style); Paddle writes them unpacked
                sub_end = pos + size
                while pos < sub_end:
                    value, pos = _read_varint(buf, pos, sub_end)
                    dims.append(_as_int64(value))
            else:
                pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                raise TensorFormatError("TensorDesc field runs past its end", key_at)
        else:
            raise TensorFormatError(f"TensorDesc has a field of wire type {wire}", key_at)
        if field == 0:
            raise TensorFormatError("TensorDesc has a field number 0", key_at)
    if code is None:
        raise TensorFormatError("TensorDesc has no data_type", end)
    return code, dims


def parse_tensor(buf, pos: int, end: int) -> tuple[TensorSpec, int]:
    """Parse one tensor header at ``buf[pos:]`` (its bytes must end by ``end``); returns
    its spec (``data_offset`` absolute in ``buf``) and the offset just past its data."""
    if end - pos < _PREFIX.size:
        raise TensorFormatError(
            f"tensor header needs {_PREFIX.size} bytes, only {end - pos} remain", pos)
    lod_version, lod_levels, tensor_version, desc_size = _PREFIX.unpack_from(buf, pos)
    if lod_version != 0:
        raise TensorFormatError(f"LoDTensor version {lod_version}; only version 0 exists", pos)
    if lod_levels != 0:
        raise TensorFormatError(
            f"tensor has {lod_levels} LoD level(s); only dense tensors (LoD level 0) are "
            "supported", pos + 4)
    if tensor_version != 0:
        raise TensorFormatError(
            f"Tensor version {tensor_version}; only version 0 exists", pos + 12)
    desc_at = pos + _PREFIX.size
    if desc_size < 0 or desc_size > min(end - desc_at, _MAX_DESC):
        raise TensorFormatError(
            f"TensorDesc size {desc_size} does not fit the {end - desc_at} bytes left", pos + 16)
    code, dims = decode_tensor_desc(buf, desc_at, desc_at + desc_size)
    if code not in DTYPE_OF_CODE:
        name = CODE_NAMES.get(code, "unknown")
        raise TensorFormatError(f"unsupported dtype code {code} ({name})", desc_at)
    if any(d < 0 for d in dims):
        raise TensorFormatError(f"tensor dims {dims} contain a negative size", desc_at)
    dtype = DTYPE_OF_CODE[code]
    numel, extent = 1, 1
    for d in dims:
        numel *= d
        extent *= max(d, 1)
    if extent > _MAX_ELEMENTS:  # NumPy cannot even describe such an array, empty or not
        raise TensorFormatError(f"tensor dims {dims} describe more than 2**48 elements",
                                desc_at)
    nbytes = numel * dtype.itemsize
    data_at = desc_at + desc_size
    if nbytes > end - data_at:
        raise TensorFormatError(
            f"tensor of shape {tuple(dims)} and dtype {dtype.name} needs {nbytes} data bytes, "
            f"only {end - data_at} remain", data_at)
    return TensorSpec(dtype, tuple(dims), data_at, nbytes), data_at + nbytes


def parse_record(buf, start: int, end: int) -> RecordLayout:
    """Parse the record ``buf[start:end]``, which must be consumed exactly. Offsets in the
    returned layout are relative to ``start``."""
    if end - start < 4:
        raise TensorFormatError(f"record of {end - start} bytes has no tensor count", start)
    (count,) = _U32.unpack_from(buf, start)
    pos = start + 4
    specs = []
    for _ in range(count):
        spec, pos = parse_tensor(buf, pos, end)
        specs.append(TensorSpec(spec.dtype, spec.shape, spec.data_offset - start, spec.nbytes))
    if pos != end:
        raise TensorFormatError(
            f"record has {end - pos} bytes after its {count} tensor(s)", pos)
    return RecordLayout(end - start, tuple(specs))


def decode_tensor(buf, pos: int = 0) -> tuple[np.ndarray, int]:
    """One tensor from ``buf`` at ``pos``: (a fresh writable array, offset past it)."""
    spec, end = parse_tensor(buf, pos, len(buf))
    return _array(buf, spec), end


def decode_record(buf) -> tuple[np.ndarray, ...]:
    """All tensors of one record's bytes, as fresh writable arrays."""
    layout = parse_record(buf, 0, len(buf))
    return tuple(_array(buf, s) for s in layout.tensors)


def _array(buf, spec: TensorSpec) -> np.ndarray:
    flat = np.frombuffer(buf, dtype=np.uint8, count=spec.nbytes, offset=spec.data_offset)
    return flat.view(spec.dtype).reshape(spec.shape).astype(spec.dtype.newbyteorder("="))
