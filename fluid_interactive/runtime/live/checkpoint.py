"""Saving and loading a compiled program: the program description and every persistable
var, written atomically; loading never evaluates code.

A checkpoint is a directory::

    program.json     the ProgramDesc (`program_to_json`)
    var-00000.npy    one NumPy .npy file per persistable var (no object dtypes, no pickle)
    ...
    manifest.json    written last: format version, the layout version of the values,
                     seed, every file's size and SHA-256, var name -> file, dtype and
                     shape; and a SHA-256 of itself

`save` writes a complete checkpoint into a fresh hidden sibling directory, fsyncs it, and
only then moves it to ``path`` with renames, so ``path`` always holds the complete old
checkpoint, the complete new one, or (for an instant, or after a crash at exactly that
instant) nothing, which `load` reports as a `CheckpointError`. `load` checks the manifest,
every file's size and hash, and every array's dtype and shape against the program before
it builds anything.

Format version 2 adds ``layout_version``: the layouts of the values ops read
(ops/value_layouts.py), so that a value saved in a layout an op no longer reads (the GRU
weight before Paddle's layout) is converted on load. Version 1 checkpoints, which predate
it, hold layout version 1 and load converted.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import secrets
import shutil
import stat
import threading
import time
from typing import Any, NamedTuple, NoReturn, Union

import numpy as np

from ...backend import to_host
from ...errors import CheckpointError, FluidError
from ...ir.records import DTYPES, ProgramDesc, VarDesc
from ...ir.serialize import program_from_json, program_to_json
from ...ops.value_layouts import LAYOUT_VERSION, upgrade
from .scope import Scope

FORMAT = "fluid_interactive.checkpoint"
FORMAT_VERSION = 2
#: The format versions `read` accepts (1: before ``layout_version``, which it implies is 1).
READ_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
PROGRAM = "program.json"

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_LEFTOVER = re.compile(r"(tmp|old)-(\d+)-([0-9a-f]{16})")
_NPY_VERSIONS = ((1, 0), (2, 0))
_MANIFEST_LIMIT = 64 << 20  # a manifest lists files; it is never near this size
#: Seconds a load waits for saves to the same path (see `read`).
LOAD_WAIT = 30.0

# Tokens of saves running in this process: their temporary directories are not leftovers.
_active: set[str] = set()
_active_lock = threading.Lock()
# Saves to one path from threads of this process take turns.
_path_locks: dict[str, threading.Lock] = {}

PathLike = Union[str, "os.PathLike[str]"]


# --- small helpers ---------------------------------------------------------------------------

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(doc: dict) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _manifest_digest(manifest: dict) -> str:
    """The SHA-256 of the manifest without its own ``manifest_sha256`` entry."""
    return _sha256(_canonical({k: v for k, v in manifest.items() if k != "manifest_sha256"}))


def _fsync_dir(path: str) -> None:
    if os.name != "posix":  # directories cannot be opened for fsync elsewhere
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(directory: str, name: str, data: bytes) -> None:
    """Write ``data`` to ``directory/name`` and fsync it (every checkpoint file goes here)."""
    with open(os.path.join(directory, name), "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _is_count(value: Any, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def _shape_in_range(shape: Any) -> bool:
    """A list of dims whose element count is one an array could have."""
    if not all(_is_count(d, _ELEMENT_LIMIT) for d in shape):
        return False
    return math.prod(shape) <= _ELEMENT_LIMIT


def _allowed_dtype(dtype: np.dtype) -> bool:
    return (dtype.kind in "biuf" and not dtype.hasobject and dtype.fields is None
            and dtype.subdtype is None and dtype.name in DTYPES)


def _fmt(dtype: Any, shape: Any) -> str:
    return f"{dtype}{list(shape)}"


def _shape_fits(declared: tuple, shape: tuple) -> bool:
    return len(declared) == len(shape) and all(d < 0 or d == s
                                               for d, s in zip(declared, shape))


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    return buf.getvalue()


def _tensor_persistables(program: ProgramDesc) -> list[VarDesc]:
    return [v for v in program.global_block().vars.values()
            if v.persistable and v.kind == "tensor"]


# --- saving ----------------------------------------------------------------------------------

def _refusal(path: str) -> str | None:
    """Why ``path`` may not be overwritten, or None when it may: it is absent, an empty
    directory, or a checkpoint that `save` wrote (its manifest is one of ours, checksum
    intact, and the directory holds nothing the manifest does not list). Files that merely
    have checkpoint-like names are somebody else's and are never deleted."""
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        return "it is not a directory"
    try:
        names = os.listdir(path)
    except OSError as e:
        return f"it cannot be listed ({e})"
    if not names:
        return None
    try:
        with _Reader(path) as reader:
            doc = reader.manifest()
    except CheckpointError as e:
        return f"it is not a checkpoint this library wrote ({e})"
    listed = set(doc["files"]) | {MANIFEST}
    extra = sorted(n for n in names if n not in listed)
    if extra:
        return (f"it holds files its checkpoint manifest does not list "
                f"({', '.join(map(repr, extra[:5]))})")
    return None


def _remove(path: str) -> None:
    """Remove a directory tree (or a link to one) if it is there; never raises."""
    try:
        if os.path.islink(path):
            os.unlink(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":
        return True  # cannot tell safely; keep the leftover
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _leftovers(parent: str, base: str) -> list[tuple[str, str, int, str]]:
    """(name, 'tmp'|'old', pid, token) of every hidden sibling a save of ``base`` made."""
    prefix = f".{base}."
    found = []
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    for name in names:
        if name.startswith(prefix):
            m = _LEFTOVER.fullmatch(name[len(prefix):])
            if m:
                found.append((name, m.group(1), int(m.group(2)), m.group(3)))
    return found


def _is_stale(pid: int, token: str, active: set[str]) -> bool:
    return token not in active if pid == os.getpid() else not _pid_alive(pid)


def _clean_leftovers(parent: str, base: str) -> None:
    """Remove what interrupted saves of ``base`` left behind: directories of saves that no
    longer run (a dead process, or this process with the save no longer active)."""
    found = _leftovers(parent, base)
    with _active_lock:
        active = set(_active)  # after the listing: see `_save_locked`
    for name, _, pid, token in found:
        if _is_stale(pid, token, active):
            _remove(os.path.join(parent, name))


def _save_in_progress(target: str) -> bool:
    """Whether a running save (of any process here) may be about to put ``target`` back."""
    parent, base = os.path.split(target)
    found = _leftovers(parent, base)
    with _active_lock:
        active = set(_active)
    return any(not _is_stale(pid, token, active) for _, _, pid, token in found)


def _snapshot(program: ProgramDesc, scope: Scope
              ) -> tuple[list[tuple[VarDesc, np.ndarray]], list[str]]:
    saved, missing = [], []
    values = scope.snapshot()  # one moment, even while another thread trains
    for var in _tensor_persistables(program):
        if var.name not in values:
            missing.append(var.name)
            continue
        array = np.asarray(to_host(values[var.name]))
        if not _allowed_dtype(array.dtype) or array.dtype.name != var.dtype:
            raise CheckpointError(f"cannot save var {var.name!r}: it is declared "
                                  f"{var.dtype} but holds {array.dtype}")
        if not _shape_fits(var.shape, array.shape):
            raise CheckpointError(f"cannot save var {var.name!r}: it is declared "
                                  f"{list(var.shape)} but holds {list(array.shape)}")
        saved.append((var, array))
    return saved, missing


def _write_checkpoint(tmp: str, program: ProgramDesc, scope: Scope, seed: int | None
                      ) -> None:
    saved, missing = _snapshot(program, scope)
    files: dict[str, dict] = {}

    def put(name: str, data: bytes) -> None:
        _write_file(tmp, name, data)
        files[name] = {"size": len(data), "sha256": _sha256(data)}

    put(PROGRAM, program_to_json(program, indent=1).encode())
    entries = []
    for i, (var, array) in enumerate(saved):
        name = f"var-{i:05d}.npy"
        put(name, _npy_bytes(array))
        entries.append({"name": var.name, "file": name, "dtype": array.dtype.name,
                        "shape": list(array.shape)})
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "layout_version": LAYOUT_VERSION,
        "seed": None if seed is None else int(seed),
        "program": PROGRAM, "files": files, "vars": entries, "uninitialized": missing,
        # where each reader is (batches since its last reset): a load continues from there
        "readers": scope.positions(),
    }
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    _write_file(tmp, MANIFEST, json.dumps(manifest, indent=1, allow_nan=False).encode())
    _fsync_dir(tmp)


def _new_sibling(parent: str, base: str, kind: str, token: str) -> str:
    return os.path.join(parent, f".{base}.{kind}-{os.getpid()}-{token}")


def _path_lock(target: str) -> threading.Lock:
    """The lock that saves and loads of ``target`` in this process take turns under."""
    with _active_lock:
        return _path_locks.setdefault(target, threading.Lock())


def _save_target(path: PathLike) -> str:
    """``path`` made absolute; a path that names the working directory (``''``, ``'.'``)
    or no directory at all is a `CheckpointError`: `save` replaces what it names."""
    given = os.fspath(path)
    target = os.path.abspath(given)
    if not given.strip() or target == os.path.abspath(os.curdir):
        raise CheckpointError(f"checkpoint path {given!r} names the working directory "
                              f"itself, which save would replace; give the checkpoint a "
                              f"directory of its own (e.g. 'checkpoint')")
    if not os.path.basename(target):
        raise CheckpointError(f"checkpoint path {given!r} names no directory")
    return target


def save(path: PathLike, program: ProgramDesc, scope: Scope, seed: int | None) -> None:
    """Write ``program`` and the value of each of its persistable vars in ``scope`` to the
    directory ``path`` (`CompiledProgram.save`).

    The checkpoint is complete in a hidden sibling directory before it replaces ``path``;
    an existing checkpoint at ``path`` is replaced, anything else there (a file, a
    directory that is neither empty nor a checkpoint, the working directory) is refused.
    The scope is not changed.
    """
    target = _save_target(path)
    parent, base = os.path.split(target)
    # The check runs under the lock: a save of another thread that is replacing the
    # checkpoint meanwhile would make it look like something that is not one.
    with _path_lock(target):
        refusal = _refusal(target)
        if refusal:
            raise CheckpointError(f"refusing to overwrite {target}: {refusal}; remove it "
                                  f"yourself or choose another path")
        os.makedirs(parent, exist_ok=True)
        _save_locked(program, scope, seed, target, parent, base)
        _clean_leftovers(parent, base)


def _save_locked(program: ProgramDesc, scope: Scope, seed: int | None, target: str,
                 parent: str, base: str) -> None:
    token = secrets.token_hex(8)
    with _active_lock:  # before any directory of this save exists
        _active.add(token)
    tmp = _new_sibling(parent, base, "tmp", token)
    try:
        os.mkdir(tmp)
        try:
            _write_checkpoint(tmp, program, scope, seed)
            _swap_in(tmp, target, parent, base, token)
        except BaseException:
            _remove(tmp)
            raise
    finally:
        with _active_lock:
            _active.discard(token)


def _swap_in(tmp: str, target: str, parent: str, base: str, token: str) -> None:
    """Move the complete checkpoint ``tmp`` to ``target``; the old one, if any, goes aside
    first (a directory cannot be renamed over a non-empty one) and is removed after."""
    old = None
    if os.path.lexists(target):
        refusal = _refusal(target)
        if refusal:  # something appeared while we were writing
            raise CheckpointError(f"refusing to overwrite {target}: {refusal} (it changed "
                                  f"while the checkpoint was written)")
        old = _new_sibling(parent, base, "old", token)
        os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        if old is not None:
            try:
                os.replace(old, target)  # put the old checkpoint back
            except OSError:
                pass  # it stays at `old`; load(target) says so
        raise
    _fsync_dir(parent)
    if old is not None:
        _remove(old)


# --- loading ---------------------------------------------------------------------------------

def _leftover_hint(target: str) -> str:
    parent, base = os.path.split(target)
    found = _leftovers(parent, base)
    if not found:
        return ""
    lines = []
    for name, kind, _, _ in sorted(found):
        full = os.path.join(parent, name)
        if kind == "old":
            what = "the checkpoint that was being replaced"
        elif os.path.exists(os.path.join(full, MANIFEST)):
            what = "a new checkpoint, written completely"
        else:
            what = "an incomplete new checkpoint"
        lines.append(f"\n  {full}: {what}")
    return ("\n  A save to this path was interrupted (or is still running); it left:"
            + "".join(lines) + "\n  Rename one to the checkpoint path to load it "
              "(fluid.load verifies it), or save again.")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_SIZE_LIMIT = 1 << 48   # bytes: larger sizes in a manifest are not real files
_ELEMENT_LIMIT = 1 << 46


class _NotRegular(OSError):
    """A checkpoint entry is a pipe, a device, a directory or a link."""


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a regular file"


def _is_link_error(error: OSError) -> bool:
    # O_NOFOLLOW on a symbolic link fails with ELOOP (Linux) or EMLINK/EFTYPE (BSDs).
    return error.errno in {getattr(errno, n) for n in ("ELOOP", "EMLINK", "EFTYPE")
                           if hasattr(errno, n)}


class _Reader:
    """Reads the files of one checkpoint directory, checking each against the manifest.

    Where the platform allows, files are opened relative to one handle on the directory, so
    a save that replaces the checkpoint meanwhile cannot mix its files into this read.
    """

    def __init__(self, target: str):
        self.target = target
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def fail(self, what: str, problem: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {self.target}: {what}: {problem}")

    def replaced(self) -> bool:
        """Whether ``target`` now names another directory than the one this read opened."""
        if self.ident is None:
            return False
        try:
            st = os.stat(self.target)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self.ident

    def _open_dir(self) -> None:
        try:
            if os.open in os.supports_dir_fd:
                self.fd = os.open(self.target, os.O_RDONLY | _NONBLOCK
                                  | getattr(os, "O_DIRECTORY", 0))
                st = os.fstat(self.fd)
            else:
                st = os.stat(self.target)
        except FileNotFoundError:
            self._raise_missing(f"{self.target} does not exist")
        except NotADirectoryError:
            self._raise_missing(f"{self.target} is not a directory")
        except OSError as e:
            raise self.fail("directory", f"cannot be opened ({e})") from None
        if not stat.S_ISDIR(st.st_mode):
            self._raise_missing(f"{self.target} is not a directory")
        self.ident = (st.st_dev, st.st_ino)

    def _read_file(self, name: str, limit: int) -> tuple[int, bytes]:
        """(size on disk, up to ``limit`` bytes) of the regular file ``name``.

        The file is opened without following a link and without blocking (a named pipe
        would wait for a writer for ever), and anything but a regular file is refused."""
        flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK
        if self.fd is not None:
            fd = os.open(name, flags, dir_fd=self.fd)
        else:
            fd = os.open(os.path.join(self.target, name), flags)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise _NotRegular(f"{_file_kind(st.st_mode)}, not a regular file")
            if st.st_size > limit:
                return st.st_size, b""
            return st.st_size, f.read(min(limit, st.st_size) + 1)

    def manifest(self) -> dict:
        self._open_dir()
        try:
            size, raw = self._read_file(MANIFEST, _MANIFEST_LIMIT)
        except FileNotFoundError:
            self._raise_missing(f"{self.target} has no {MANIFEST}: it is not a checkpoint, "
                                f"or the save that wrote it never finished")
        except OSError as e:
            raise self.fail(MANIFEST, _unreadable(e)) from None
        if size > _MANIFEST_LIMIT:
            raise self.fail(MANIFEST, f"{size} bytes; a manifest is never larger than "
                                      f"{_MANIFEST_LIMIT}")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise self.fail(MANIFEST, f"not valid JSON ({e})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise self.fail(MANIFEST, f"not a fluid_interactive checkpoint manifest "
                                      f"(expected format {FORMAT!r})")
        version = doc.get("format_version")
        if version not in READ_VERSIONS or not isinstance(version, int) or \
                isinstance(version, bool):
            raise self.fail(MANIFEST, f"unknown format version {version!r}; this version of "
                                      f"fluid_interactive reads versions "
                                      f"{', '.join(map(str, READ_VERSIONS))}")
        try:
            digest = _manifest_digest(doc)
        except ValueError:  # NaN or infinity: never written by `save`
            digest = None
        if digest is None or doc.get("manifest_sha256") != digest:
            raise self.fail(MANIFEST, "its checksum does not match its contents (it was "
                                      "edited or is corrupt)")
        self._check_structure(doc)
        self._check_layout(doc)
        return doc

    def _check_layout(self, doc: dict) -> None:
        if doc["format_version"] == 1:
            return
        layout = doc.get("layout_version")
        if not isinstance(layout, int) or isinstance(layout, bool) or layout < 1:
            raise self.fail(MANIFEST, f"malformed: layout_version is {layout!r}, not a "
                                      f"version number")
        if layout > LAYOUT_VERSION:
            raise self.fail(MANIFEST, f"its values are in layout version {layout}, written by "
                                      f"a newer fluid_interactive; this one reads versions up "
                                      f"to {LAYOUT_VERSION}")

    def _raise_missing(self, message: str) -> NoReturn:
        raise CheckpointError(message + _leftover_hint(self.target))

    def _check_structure(self, doc: dict) -> None:
        files, entries = doc.get("files"), doc.get("vars")
        seed, missing = doc.get("seed"), doc.get("uninitialized")
        readers = doc.get("readers", {})
        ok = (isinstance(files, dict) and isinstance(entries, list)
              and isinstance(readers, dict)
              and all(isinstance(k, str) and _is_count(v, 2 ** 62)
                      for k, v in readers.items())
              and isinstance(missing, list) and all(isinstance(n, str) for n in missing)
              and doc.get("program") == PROGRAM and PROGRAM in files
              and (seed is None or _is_count(seed, 2 ** 63 - 1)))
        if ok and isinstance(files, dict) and isinstance(entries, list):  # (for mypy)
            for name, entry in files.items():
                ok = ok and (_SAFE_NAME.fullmatch(name) is not None and name != MANIFEST
                             and isinstance(entry, dict)
                             and _is_count(entry.get("size"), _SIZE_LIMIT)
                             and isinstance(entry.get("sha256"), str))
            for e in entries:
                ok = ok and (isinstance(e, dict) and isinstance(e.get("name"), str)
                             and e.get("file") in files and isinstance(e.get("dtype"), str)
                             and isinstance(e.get("shape"), list)
                             and _shape_in_range(e["shape"]))
        if not ok:
            raise self.fail(MANIFEST, "malformed (a required entry is missing, has the "
                                      "wrong type, or a size or shape out of range)")

    def read(self, name: str, entry: dict) -> bytes:
        """The bytes of ``name``, after checking its size and SHA-256 against ``entry``."""
        expected = entry["size"]
        try:
            size, data = self._read_file(name, expected)
        except FileNotFoundError:
            raise self.fail(name, "the file is missing") from None
        except OSError as e:
            raise self.fail(name, _unreadable(e)) from None
        if size != expected:
            raise self.fail(name, f"size is {size} bytes; the manifest says {expected} "
                                  f"(truncated or altered)")
        if len(data) != expected:
            raise self.fail(name, "the file changed while it was read")
        digest = _sha256(data)
        if digest != entry["sha256"]:
            raise self.fail(name, f"SHA-256 is {digest}; the manifest says "
                                  f"{entry['sha256']} (corrupt or altered)")
        return data


def _unreadable(error: OSError) -> str:
    if isinstance(error, _NotRegular):
        return f"is {error}; a checkpoint holds regular files only"
    if _is_link_error(error):
        return "is a symbolic link; a checkpoint holds regular files only (links are not " \
               "followed)"
    return f"cannot be read ({error})"


def _parse_npy(reader: _Reader, file: str, data: bytes, var: VarDesc) -> np.ndarray:
    """An array from .npy bytes: the header is checked before any data is interpreted, and
    object dtypes (the only way a .npy can carry a pickle) are refused."""
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        if version not in _NPY_VERSIONS:
            raise ValueError(f"unsupported .npy version {version}")
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(f)
    except (ValueError, SyntaxError, TypeError, KeyError) as e:
        raise reader.fail(file, f"not a valid .npy array file ({e})") from None
    if not _allowed_dtype(dtype):
        raise reader.fail(file, f"var {var.name!r} is stored with dtype {dtype!r}, which a "
                                f"checkpoint may not hold (only {', '.join(DTYPES)}); "
                                f"refusing to load it")
    shape = tuple(int(d) for d in shape)
    if not _shape_in_range(list(shape)):
        raise reader.fail(file, f"var {var.name!r}: shape {list(shape)} is out of range")
    if dtype.name != var.dtype or not _shape_fits(var.shape, shape):
        raise reader.fail(file, f"var {var.name!r}: the program declares "
                                f"{_fmt(var.dtype, var.shape)}; the file holds "
                                f"{_fmt(dtype.name, shape)}")
    count = math.prod(shape)
    body = data[f.tell():]
    if len(body) != count * dtype.itemsize:
        raise reader.fail(file, f"var {var.name!r}: {len(body)} data bytes for "
                                f"{_fmt(dtype.name, shape)}, which needs "
                                f"{count * dtype.itemsize}")
    flat = np.frombuffer(body, dtype=dtype, count=count)
    array = flat.reshape(shape, order="F" if fortran else "C")
    # An owned, writable, C-ordered, native-endian copy.
    return np.array(array, dtype=dtype.newbyteorder("="), order="C", copy=True)


def _load_arrays(reader: _Reader, doc: dict, program: ProgramDesc) -> dict[str, np.ndarray]:
    declared = {v.name: v for v in _tensor_persistables(program)}
    values: dict[str, np.ndarray] = {}
    for entry in doc["vars"]:
        name, file = entry["name"], entry["file"]
        var = declared.get(name)
        if var is None:
            raise reader.fail(MANIFEST, f"var {name!r} ({file}) is not a persistable var of "
                                        f"the saved program")
        if name in values:
            raise reader.fail(MANIFEST, f"var {name!r} is listed twice")
        if entry["dtype"] != var.dtype or not _shape_fits(var.shape, tuple(entry["shape"])):
            raise reader.fail(MANIFEST, f"var {name!r}: the program declares "
                                        f"{_fmt(var.dtype, var.shape)}; the manifest lists "
                                        f"{_fmt(entry['dtype'], entry['shape'])}")
        values[name] = _parse_npy(reader, file, reader.read(file, doc["files"][file]), var)
    absent = [n for n in declared if n not in values and n not in doc["uninitialized"]]
    if absent:
        raise reader.fail(MANIFEST, f"no value for persistable var(s) "
                                    f"{', '.join(map(repr, absent))}")
    return values


def _read_checkpoint(reader: _Reader, check_program: Any
                     ) -> tuple[dict, ProgramDesc, dict[str, np.ndarray]]:
    doc = reader.manifest()
    text = reader.read(PROGRAM, doc["files"][PROGRAM])
    try:
        program = program_from_json(text.decode("utf-8"))
        check_program(program)
    except (FluidError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            RecursionError) as e:
        raise reader.fail(PROGRAM, f"not a valid program ({type(e).__name__}: {e})") from None
    values = _load_arrays(reader, doc, program)
    used = {PROGRAM} | {e["file"] for e in doc["vars"]}
    for name, entry in doc["files"].items():
        if name not in used:  # `save` lists no such file, but every listed file must check
            reader.read(name, entry)
    return doc, program, values


class Checkpoint(NamedTuple):
    """A verified checkpoint: the program, its seed, host arrays of its state, and the
    position of each reader (batches it had returned since its last reset)."""
    program: ProgramDesc
    seed: int | None
    values: dict[str, np.ndarray]
    positions: dict[str, int] = {}


def read(path: PathLike) -> Checkpoint:
    """Read and verify the checkpoint at ``path`` (manifest, file sizes and hashes, array
    dtypes and shapes against the program); any problem raises `CheckpointError` naming
    the file and what is wrong. `fluid.load` compiles what this returns.

    A save to the same path in this process is waited for (up to `LOAD_WAIT` seconds);
    one in another process that replaces the checkpoint while it is read makes the read
    start again, for as long."""
    target = os.path.abspath(os.fspath(path))
    deadline = time.monotonic() + LOAD_WAIT
    lock = _path_lock(target)
    if not lock.acquire(timeout=LOAD_WAIT):
        raise CheckpointError(f"checkpoint {target}: a save to it in this process has run "
                              f"for more than {LOAD_WAIT:g} s; load it when the save ends")
    try:
        return _read_until(target, deadline)
    finally:
        lock.release()


def _read_until(target: str, deadline: float) -> Checkpoint:
    from ...passes.verify import check_program

    attempts = 0
    while True:
        attempts += 1
        with _Reader(target) as reader:
            try:
                doc, program, values = _read_checkpoint(reader, check_program)
                values = upgrade(program, values, doc.get("layout_version", 1))
                readers = {v.name for v in program.global_block().vars.values()
                           if v.kind == "reader"}
                positions = {k: int(v) for k, v in doc.get("readers", {}).items()
                             if k in readers}
                return Checkpoint(program, doc["seed"], values, positions)
            except CheckpointError as e:
                # A save replaced the checkpoint while it was read, or is between its two
                # renames: read the new one.
                racing = reader.replaced() or (reader.ident is None
                                               and _save_in_progress(target))
                if not racing:
                    raise
                if time.monotonic() >= deadline:
                    raise CheckpointError(
                        f"checkpoint {target}: saves from another process replaced it "
                        f"while it was read, {attempts} times in {LOAD_WAIT:g} s; load it "
                        f"when they pause (the last attempt found: {e})") from None
        time.sleep(min(0.1, 0.01 * attempts))
