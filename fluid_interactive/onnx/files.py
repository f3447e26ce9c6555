"""Reading the files of an ONNX model, which are untrusted: the model file and the files
beside it that hold tensors (external data, as ``torch.onnx.export`` writes for most
weights).

Only regular files are read: a named pipe would block for ever waiting for a writer, a
device (or a link to ``/dev/zero``) would stream until memory runs out. Files are opened
without following a link and without blocking, and read up to the size they had when
opened. An external-data file must sit beside the model (a plain file name, no directory
part), and each tensor's offset and length must lie inside it and match its dims.
"""
from __future__ import annotations

import errno
import os
import stat

from ..errors import OnnxError

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_LINK_ERRORS = {getattr(errno, n) for n in ("ELOOP", "EMLINK", "EFTYPE") if hasattr(errno, n)}


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a regular file"


def open_regular(path: str, what: str) -> tuple[int, int]:
    """(descriptor, size) of the regular file ``path``; an `OnnxError` for anything else.
    A missing file stays a `FileNotFoundError`."""
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno in _LINK_ERRORS:
            raise OnnxError(f"{what} {path} is a symbolic link; ONNX models are read from "
                            f"regular files only (pass the file it points to: "
                            f"os.path.realpath(path))") from None
        raise OnnxError(f"{what} {path} cannot be opened: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OnnxError(f"{what} {path} is {_kind(st.st_mode)}; ONNX models are read from "
                        f"regular files only")
    return fd, st.st_size


def read_regular(path: str, what: str = "ONNX model") -> bytes:
    """The bytes of the regular file ``path``, as many as it held when opened."""
    fd, size = open_regular(path, what)
    try:
        chunks, left = [], size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 30))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


class ExternalData:
    """The external-data files of one model, each opened once, read by (offset, length)."""

    def __init__(self, model_path: str):
        self.model_path = model_path
        self.directory = os.path.dirname(os.path.abspath(model_path))
        self.files: dict[str, tuple[int, int]] = {}

    def __enter__(self) -> ExternalData:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd, _ in self.files.values():
            os.close(fd)
        self.files.clear()

    def read(self, entries: dict[str, str], nbytes: int, what: str) -> bytes:
        """The ``nbytes`` bytes that ``entries`` (an ONNX ``external_data`` list as a dict:
        location, offset, length) point at, for ``what`` (how messages name the tensor)."""
        location = entries.get("location", "")
        fail = f"{self.model_path}: {what} keeps its data in external file {location!r}"
        if (not location or not location.isprintable() or location in (".", "..")
                or os.path.basename(location) != location or "\\" in location):
            raise OnnxError(f"{fail}; external data must be a file beside the model, named "
                            f"without a directory part")
        offset = _count(entries.get("offset", "0"), fail, "offset")
        length = _count(entries.get("length", str(nbytes)), fail, "length")
        if length != nbytes:
            raise OnnxError(f"{fail}: its length {length} does not match the {nbytes} bytes "
                            f"its dims and type need")
        fd, size = self._open(location, fail)
        if offset + length > size:
            raise OnnxError(f"{fail}: bytes {offset}..{offset + length} lie beyond the "
                            f"file's end ({size} bytes)")
        data = os.pread(fd, length, offset) if length else b""
        if len(data) != length:
            raise OnnxError(f"{fail}: the file changed while it was read")
        return data

    def _open(self, location: str, fail: str) -> tuple[int, int]:
        if location not in self.files:
            try:
                self.files[location] = open_regular(os.path.join(self.directory, location),
                                                    "external data file")
            except FileNotFoundError:
                raise OnnxError(f"{fail}, which does not exist beside the model (copy it "
                                f"there, or save with onnx.save(model, path, "
                                f"save_as_external_data=False))") from None
            except OnnxError as e:
                raise OnnxError(f"{fail}: {e}") from None
        return self.files[location]


def _count(text: str, fail: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise OnnxError(f"{fail}: its {what} {text[:40]!r} is not a byte count")
    return value
