"""Building compiled kernels: module texts compiled by Numba in a background thread, and
cached on disk so that a later process loads them instead of compiling.

A kernel is a function of a module text (`KernelSource`): the text is written once to the
cache folder under a name that hashes it (so a changed text never meets a stale cache),
and a child process imports it from there and compiles the function with Numba's own
disk cache (``cache=True``) by a call on example arguments of the plan's types; then a
marker file records it, so a plan learns that its kernels are ready to load without
importing Numba. Loading runs in a background thread of the process itself. A loaded
kernel accepts only the types it was built for (`disable_compile`): a call with others
raises, and its caller runs NumPy instead, so nothing ever compiles while a step runs.

``FLUID_KERNELS=numpy`` turns the tier off; ``FLUID_KERNELS=fast`` lets it run the kernels
whose values are NumPy's within float rounding only (`approximate_allowed`);
``FLUID_KERNEL_CACHE`` names the cache folder (default:
``~/.cache/fluid_interactive/kernels``).
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import linecache
import os
import queue
import subprocess
import sys
import threading
import types
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

#: Numba's options for every kernel: no Python error checks in the loop (a float division
#: by zero gives inf or nan, as NumPy's does; and the loop vectorises), nothing contracted
#: into a multiply-add (fastmath off), the GIL released while it runs.
NJIT_OPTIONS = "cache=True, error_model='numpy', nogil=True, fastmath=False"
TIER_VERSION = "2"


def enabled() -> bool:
    """Whether the compiled tier may run: Numba is installed, the environment does not
    turn the tier off, and the cache folder can be made and written (else the tier says
    so once, and every kernel runs NumPy)."""
    if os.environ.get("FLUID_KERNELS", "auto").lower() in ("numpy", "off", "0"):
        return False
    return _numba_stamp() is not None and cache_usable()


def approximate_allowed() -> bool:
    """Whether the tier may run kernels whose values are NumPy's within float rounding,
    not bit for bit (``FLUID_KERNELS=fast``). Off by default: a plan switches to its
    compiled kernels when their build is over, and keeps them or its NumPy kernels by
    which ran faster, so with such kernels two runs of one seeded training would differ
    in their last bits, and then more, from the step where they switched on."""
    return os.environ.get("FLUID_KERNELS", "auto").lower() == "fast"


_STAMP: list[str | None] = []


def _numba_stamp() -> str | None:
    """Where Numba is installed and when (a changed install invalidates the markers), or
    None without Numba; found without importing it."""
    if not _STAMP:
        spec = importlib.util.find_spec("numba")
        origin = spec.origin if spec is not None else None
        _STAMP.append(None if origin is None else f"{origin}:{os.path.getmtime(origin)}")
    return _STAMP[0]


def _configured_dir() -> str:
    # asked for each compiled kernel of every plan: resolved once per setting
    return _resolved_dir(os.environ.get("FLUID_KERNEL_CACHE"), os.environ.get("HOME"))


@lru_cache(maxsize=16)
def _resolved_dir(configured: str | None, home: str | None) -> str:
    return configured or os.path.join(os.path.expanduser("~"), ".cache",
                                      "fluid_interactive", "kernels")


#: configured folder -> None when it is usable, else why not (each looked at once)
_DIR_STATE: dict[str, str | None] = {}


def cache_dir() -> str:
    """The cache folder, made if needed (OSError when it cannot be: see `cache_usable`)."""
    path = _configured_dir()
    if path not in _DIR_STATE:   # asked for every kernel of every plan: made once
        os.makedirs(path, exist_ok=True)
    return path


def cache_usable() -> bool:
    """Whether the cache folder can be made and written. The first time a folder cannot
    (its name is a file's, HOME is a file or a folder such as /proc), a
    `KernelCacheWarning` says so: the tier is only a speed-up, so the calls go on with
    NumPy kernels."""
    path = _configured_dir()
    if path not in _DIR_STATE:
        _DIR_STATE[path] = why = _unusable(path)
        if why is not None:
            # here: the child that compiles runs this file alone, without the package
            from ..errors import KernelCacheWarning
            warnings.warn(f"the compiled kernel tier is off: its cache folder {path!r} "
                          f"cannot be used ({why}); every kernel runs NumPy. Set "
                          f"FLUID_KERNEL_CACHE to a folder you can write, or "
                          f"FLUID_KERNELS=numpy to turn the tier off", KernelCacheWarning,
                          stacklevel=_outside_level())
    return _DIR_STATE[path] is None


def _outside_level() -> int:
    """The ``stacklevel`` of the caller's first frame outside the package and its
    generated code (the user's line), for a warning given by the caller."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (frame.f_code.co_filename.startswith(root)
                                        or frame.f_code.co_filename.startswith("<fluid:")):
        frame, level = frame.f_back, level + 1
    return level


def _unusable(path: str) -> str | None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    if not os.access(path, os.W_OK | os.X_OK):
        return "not writable"
    return None


def forget_cache_dir() -> None:
    """Look at the cache folder again on next use (after its setting changed)."""
    _DIR_STATE.clear()


#: An argument of a kernel's example call: ("array", dtype, ndim) (C-contiguous),
#: ("array", dtype, ndim, "A") (any layout: Numba takes a C-contiguous one too), either
#: with the example's shape after them (("array", dtype, ndim, "C", shape): a kernel
#: that reads its arrays at the sizes one of them gives), or ("scalar", dtype).
ArgType = tuple


@dataclass(frozen=True)
class KernelSource:
    """A function ``function`` of the module text ``text``, compiled for arguments of the
    types ``args`` (C-contiguous arrays and scalars)."""
    stem: str                       # a readable prefix of the module's file name
    text: str
    function: str
    args: tuple[ArgType, ...]

    @property
    def key(self) -> str:
        # The argument types too: one text may serve several dtypes (a chain whose
        # members name no constant), and a loaded kernel accepts only the types it was
        # built for, so each gets a module of its own.
        return _module_key(self.stem, self.text, self.args)

    def path(self) -> str:
        return os.path.join(cache_dir(), self.key + ".py")

    def marker(self) -> str:
        h = hashlib.sha256("\0".join((self.key, self.function, repr(self.args),
                                      _numba_stamp() or "")).encode())
        return os.path.join(cache_dir(), f"{self.key}.{h.hexdigest()[:16]}.ok")

    def is_cached(self) -> bool:
        try:
            return os.path.exists(self.marker())
        except OSError:   # the folder went away or became unusable: not cached
            return False

    def write(self) -> str:
        """The module's file in the cache folder (written whole, once)."""
        path = self.path()
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w") as f:
                f.write(self.text)
            os.replace(tmp, path)   # whole or not at all, for concurrent processes
        return path


@lru_cache(maxsize=512)
def _module_key(stem: str, text: str, args: tuple) -> str:
    """The cache's name of a module (its digest: asked again by every plan that requests
    the kernel, at every size, so computed once per text)."""
    h = hashlib.sha256("\0".join((TIER_VERSION, sys.version, text, repr(args))).encode())
    return f"{stem}_{h.hexdigest()[:16]}"


@cache
def _source_of(function: Callable) -> str:
    """A tier function's text (its module's file does not change while it runs)."""
    return function_source(function).rstrip()


def function_source(fn: Callable[..., Any]) -> str:
    """The text of a function defined in a file, from its first line (or decorator) to
    the last line its code (and the code of functions defined in it) covers, read through
    `linecache`. `inspect.getsource` finds the end by tokenizing, whose patterns cost a
    process's first compiled kernel about 5 ms to compile; the text differs from it at
    most by comment lines after the last statement."""
    code = getattr(fn, "__code__", None)
    if code is None or not hasattr(code, "co_positions") or hasattr(fn, "__wrapped__"):
        return inspect.getsource(fn)   # Python 3.10 (no end lines), or a wrapper
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    if not lines:
        return inspect.getsource(fn)
    first = code.co_firstlineno - 1   # its first decorator's line, if it has any
    signature = next((i for i in range(first, len(lines))
                      if lines[i].lstrip().startswith(("def ", "async def "))), first)
    end = max(_last_line(code), signature + 1)
    # lines after the last one with code that still belong to the body (more indented:
    # a comment, a docstring's end), and blank lines between them
    indent = _indent(lines[first])
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > first + 1 and not lines[end - 1].strip():
        end -= 1
    return "".join(lines[first:end])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _last_line(code: Any) -> int:
    ends = [end for _, end, _, _ in code.co_positions() if end is not None]
    ends += [_last_line(c) for c in code.co_consts if isinstance(c, types.CodeType)]
    return max(ends, default=code.co_firstlineno)


def example_args(args: Sequence[ArgType]) -> list:
    """Arguments of these types for a compiling call."""
    import numpy as np

    def example(a: ArgType) -> Any:
        if a[0] != "array":
            return np.dtype(a[1]).type(0.5)
        shape = tuple(a[4]) if len(a) > 4 else (2,) * a[2]
        if a[3:4] == ("A",):   # a view with a stride: Numba types it as any layout
            return np.ones(shape[:-1] + (2 * shape[-1],), a[1])[..., ::2]
        return np.ones(shape, a[1])
    return [example(a) for a in args]


def module_text(body: str, functions: Sequence[str]) -> str:
    """A module that defines ``functions`` in ``body`` and compiles each with Numba."""
    wrap = "\n".join(f"{f} = njit({NJIT_OPTIONS})({f})" for f in functions)
    return f"{body.rstrip()}\n\n\nfrom numba import njit  # noqa: E402\n\n{wrap}\n"


def module_source(dtype: str, constants: dict[str, int], functions: Sequence[Callable]
                  ) -> str:
    """The text of a module of ``functions`` (plain Python functions of the tier, taken
    from their source) after ``constants`` of one kernel (a window, strides), for arrays
    of ``dtype``: a module per dtype, since a loaded kernel takes only the types it was
    built for."""
    head = [f"# {dtype} arrays", "import numpy as np  # noqa: F401", ""]
    head += [f"{name} = {int(value)}" for name, value in constants.items()]
    return "\n".join(head) + "\n\n\n" + "\n\n\n".join(
        _source_of(f) for f in functions) + "\n"


_MODULES: dict[str, Any] = {}
_LOADED: dict[tuple[str, KernelSource], Callable] = {}   # by cache folder and source
_LOAD_LOCK = threading.RLock()     # one load at a time
_NUMBA_READY = threading.Event()


def numba_ready() -> bool:
    """Whether this process has loaded a compiled kernel: then Numba and the parts of it
    that loading from the cache needs are imported, and loading another kernel takes
    milliseconds (the first takes a few hundred)."""
    return _NUMBA_READY.is_set()


def _load_latest(markers: list[str]) -> None:
    """Load the kernel of the newest marker (any would do): it imports what every
    later load needs."""
    newest = max(markers, key=os.path.getmtime)
    with open(newest) as f:
        job = json.load(f)
    _compiled(job["path"], job["name"], job["function"], [tuple(a) for a in job["args"]])


def interactive() -> bool:
    """Whether this process is an interactive session (IPython, Jupyter, the Python
    prompt), read without importing anything."""
    return "IPython" in sys.modules or hasattr(sys, "ps1") or bool(sys.flags.interactive)


def preload() -> None:
    """Load a kernel of the disk cache in a background thread when the cache holds any:
    in a notebook that is over before the first cell calls a program, so its plans load
    their compiled kernels at once and run them from the first call. (The package calls
    it when imported in an interactive session only: in a script it would share the
    interpreter with the compile that follows the import, and slow it 2-4x.)"""
    if not enabled() or numba_ready() or preload_running():
        return
    try:
        folder = cache_dir()
        markers = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".ok")]
    except OSError:
        return
    if markers:
        _PRELOAD.append(threading.Thread(target=_quietly, args=(_load_latest, markers),
                                         name="fluid-kernel-preload", daemon=True))
        _PRELOAD[-1].start()


def _quietly(fn: Callable, *args: Any) -> None:
    try:   # a damaged or outdated cache entry: plans build their kernels as usual
        fn(*args)
    except Exception:
        pass


_PRELOAD: list[threading.Thread] = []


def preload_running() -> bool:
    """Whether `preload` is still at work."""
    return any(t.is_alive() for t in _PRELOAD)


def _compiled(path: str, name: str, function: str, args: Sequence[ArgType]) -> Any:
    """Import the module at ``path`` (once per process) and run ``function`` on example
    arguments: Numba compiles it, or loads it from its disk cache."""
    with _LOAD_LOCK:
        module = _MODULES.get(path)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module   # Numba's cache finds its functions' module here
            spec.loader.exec_module(module)
            _MODULES[path] = module
        fn = getattr(module, function)
        fn(*example_args(args))
        _NUMBA_READY.set()
    return fn


def loaded(source: KernelSource) -> Callable | None:
    """The function of ``source`` if this process has loaded it from the cache folder
    configured now (then every later plan that asks for it, at any size, takes it
    without looking at the disk)."""
    return _LOADED.get((_configured_dir(), source))


def load(source: KernelSource) -> Callable:
    """The compiled function, loaded from the disk cache (or compiled here, when the
    cache lacks it), accepting only the types it was built for from then on. The first
    kernel that calls BLAS (SciPy's, through Numba) loads that library: the thread policy
    then sets its count too (backend/threads.py)."""
    fn = loaded(source)
    if fn is not None:
        return fn
    fn = _compiled(source.write(), f"fluid_kernel_{source.key}", source.function, source.args)
    fn.disable_compile()
    _LOADED[_configured_dir(), source] = fn
    if "np.dot(" in source.text and not _BLAS_SEEN:
        try:   # Numba's np.dot calls SciPy's BLAS: loaded now, so the policy finds it
            import scipy.linalg.cython_blas  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:  # pragma: no cover (Numba's np.dot needs SciPy)
            pass
        from ..backend import threads  # here: the child that compiles runs this file alone
        _BLAS_SEEN.append(True)
        threads.STATE.rescan()
    return fn


_BLAS_SEEN: list[bool] = []


def _job(source: KernelSource) -> dict:
    return {"path": source.write(), "name": f"fluid_kernel_{source.key}",
            "function": source.function, "args": source.args, "marker": source.marker()}


def compile_elsewhere(source: KernelSource, timeout: float = 600) -> None:
    """Compile ``source`` into the disk cache in a child process (this file run as a
    script, without the package): compiling holds the interpreter lock for seconds, which
    would stall the calls that run meanwhile; loading the result takes milliseconds."""
    job = json.dumps(_job(source))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__)], input=job, text=True,
                          capture_output=True, timeout=timeout)
    if proc.returncode != 0 or not source.is_cached():
        raise RuntimeError(f"compiling {source.function} failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[-2000:]}")


class Builder:
    """One background thread that builds kernels in the order asked (each compiled in a
    child process, then loaded here); the thread starts with a request and ends when no
    request is left."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[KernelSource, Future]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pending: dict[str, Future] = {}
        self._lock = threading.Lock()

    def submit(self, source: KernelSource) -> Future:
        ident = source.marker()
        with self._lock:
            fut = self._pending.get(ident)
            if fut is not None:
                return fut
            fut = Future()
            self._pending[ident] = fut
            self._jobs.put((source, fut))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fluid-kernels",
                                                daemon=True)
                self._thread.start()
        return fut

    def _run(self) -> None:
        while True:
            with self._lock:   # the same lock as submit's: no request is left unserved
                if self._jobs.empty():
                    self._thread = None
                    return
                source, fut = self._jobs.get()
            try:
                if not source.is_cached():
                    compile_elsewhere(source)
                fut.set_result(load(source))
            except BaseException as e:   # a kernel that fails to build stays NumPy
                fut.set_exception(e)


BUILDER = Builder()


def _main() -> None:
    """The child of `compile_elsewhere`: compile one kernel, then write its marker."""
    job = json.load(sys.stdin)
    _compiled(job["path"], job["name"], job["function"], [tuple(a) for a in job["args"]])
    write_marker(job)


def write_marker(job: dict) -> None:
    """The marker of a built kernel: what `preload` needs to load it again."""
    with open(job["marker"], "w") as f:
        json.dump({k: job[k] for k in ("path", "name", "function", "args")}, f)


if __name__ == "__main__":
    _main()
