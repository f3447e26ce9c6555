"""A stand-in for CuPy that runs on the host: proves without a GPU that kernels keep their
data on the device.

`DeviceArray` wraps a NumPy array the way a CuPy array wraps device memory, and refuses
what CuPy refuses: ``np.asarray(dev)`` (and any NumPy function or ufunc applied to it)
raises ``TypeError``, and so does mixing a host ``ndarray`` into a device operation. The
module object (`module`) is named ``cupy`` so that the engine takes its device paths
(``spec.cupy_kernel``, ``.get()`` at fetches). Every host/device crossing is counted in
`counts`:

* ``to_device``: ``xp.asarray``/``xp.array`` of host data, a host array used as an index
  or assigned into a device array;
* ``to_host``: ``.get()``, ``.tolist()``;
* ``sync``: a device value read as a Python number (``.item()``, ``float()``, ``int()``,
  ``bool()``): no array copy, but the host waits for the device.

A kernel that silently falls back to NumPy either raises here or shows up in the counts.
"""
from __future__ import annotations

import contextlib
import operator
import types
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

counts: Counter = Counter()

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
             "construct a NumPy array explicitly.")


@contextlib.contextmanager
def counting() -> Iterator[Counter]:
    """Counts of the crossings made inside the block (fresh each time)."""
    before = Counter(counts)
    seen: Counter = Counter()
    try:
        yield seen
    finally:
        seen.update({k: v - before.get(k, 0) for k, v in counts.items()})


def _unwrap(value: Any, inputs: dict) -> Any:
    """Device arrays -> their host arrays (remembered in ``inputs`` so a result that *is*
    an input comes back as the same wrapper); host arrays are refused as CuPy does."""
    if isinstance(value, DeviceArray):
        inputs[id(value._a)] = value
        return value._a
    if isinstance(value, np.ndarray):
        raise TypeError(f"Unsupported type {type(value)}: a host numpy.ndarray given to a "
                        f"device function (move it with xp.asarray first)")
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, inputs) for v in value)
    return value


def _wrap(value: Any, inputs: dict) -> Any:
    if isinstance(value, np.ndarray):
        same = inputs.get(id(value))
        return same if same is not None and same._a is value else DeviceArray(value)
    if isinstance(value, np.generic) and not isinstance(value, np.dtype):
        return DeviceArray(np.asarray(value))   # CuPy reductions give 0-d device arrays
    if isinstance(value, tuple):
        return tuple(_wrap(v, inputs) for v in value)
    if isinstance(value, list):
        return [_wrap(v, inputs) for v in value]
    return value


def _device_call(fn, args: tuple, kwargs: dict) -> Any:
    inputs: dict = {}
    a = _unwrap(args, inputs)
    k = {key: _unwrap(v, inputs) for key, v in kwargs.items()}
    return _wrap(fn(*a, **k), inputs)


class DeviceArray:
    """A host array posing as device memory (see the module docstring)."""

    __slots__ = ("_a",)
    __array_ufunc__ = None          # np.add(dev, ...) -> TypeError, as CuPy without NEP 13

    def __init__(self, array: np.ndarray):
        self._a = array

    def __array__(self, *args: Any, **kwargs: Any):
        raise TypeError(_IMPLICIT)

    def __array_function__(self, func, types_, args, kwargs):
        return NotImplemented       # np.sum(dev) etc. -> TypeError: use xp.sum

    # --- explicit crossings ------------------------------------------------------------
    def get(self) -> np.ndarray:
        counts["to_host"] += 1
        return self._a.copy()

    def tolist(self) -> Any:
        counts["to_host"] += 1
        return self._a.tolist()

    def item(self) -> Any:
        counts["sync"] += 1
        return self._a.item()

    def __float__(self) -> float:
        counts["sync"] += 1
        return float(self._a)

    def __int__(self) -> int:
        counts["sync"] += 1
        return int(self._a)

    def __bool__(self) -> bool:
        counts["sync"] += 1
        return bool(self._a)

    # --- array protocol ----------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: DeviceArray(self._a.T))

    @property
    def base(self) -> Any:
        return None if self._a.base is None else DeviceArray(self._a.base)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        return (DeviceArray(row) if isinstance(row, np.ndarray) else row for row in self._a)

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._a, name)
        if not callable(attr):
            return attr

        def method(*args: Any, **kwargs: Any) -> Any:
            return _device_call(attr, args, kwargs)
        return method

    def _index(self, key: Any) -> Any:
        if isinstance(key, tuple):
            return tuple(self._index(k) for k in key)
        if isinstance(key, DeviceArray):
            return key._a
        if isinstance(key, np.ndarray):
            counts["to_device"] += 1   # CuPy copies a host index array to the device
            return key
        return key

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._a[self._index(key)], {id(self._a): self})

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, DeviceArray):
            value = value._a
        elif isinstance(value, np.ndarray) and value.ndim > 0:
            counts["to_device"] += 1   # host data copied in
        self._a[self._index(key)] = value


def _operand(value: Any) -> Any:
    if isinstance(value, DeviceArray):
        return value._a
    if isinstance(value, np.ndarray):
        raise TypeError(f"Unsupported type {type(value)}: host array in a device operation")
    return value


def _binary(op):
    def forward(self, other):
        return _wrap(op(self._a, _operand(other)), {})

    def reverse(self, other):
        return _wrap(op(_operand(other), self._a), {})
    return forward, reverse


def _inplace(op):
    def method(self, other):
        op(self._a, _operand(other))
        return self
    return method


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("matmul", operator.matmul),
                   ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)):
    _f, _r = _binary(_op)
    setattr(DeviceArray, f"__{_name}__", _f)
    setattr(DeviceArray, f"__r{_name}__", _r)
    setattr(DeviceArray, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(DeviceArray, f"__{_name}__", _binary(getattr(operator, _name))[0])
for _name in ("neg", "pos", "abs", "invert"):
    setattr(DeviceArray, f"__{_name}__",
            (lambda op: lambda self: DeviceArray(op(self._a)))(getattr(operator, _name)))
DeviceArray.__hash__ = None  # type: ignore[assignment]


class _Ufunc:
    """A ufunc over device arrays, with its methods (reduce, at, ...) wrapped too."""

    def __init__(self, ufunc: np.ufunc):
        self._u = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _device_call(self._u, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._u, name)
        if not callable(attr):
            return attr
        return lambda *a, **k: _device_call(attr, a, k)


def _to_device(fn):
    def transfer(obj: Any, *args: Any, **kwargs: Any) -> DeviceArray:
        if isinstance(obj, DeviceArray):
            return _device_call(fn, (obj,) + args, kwargs)
        counts["to_device"] += 1
        return DeviceArray(np.array(fn(obj, *args, **kwargs)))
    return transfer


class _Generator:
    """``xp.random.default_rng(seed)``: draws made on the device."""

    def __init__(self, seed: Any = None):
        self._g = np.random.default_rng(seed)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._g, name)
        return lambda *a, **k: _device_call(attr, a, k)


class _Namespace(types.ModuleType):
    """NumPy's namespace over device arrays."""

    def __init__(self, name: str, host: types.ModuleType):
        super().__init__(name)
        self._host = host

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._host, name)
        if isinstance(attr, np.ufunc):
            wrapped: Any = _Ufunc(attr)
        elif isinstance(attr, types.ModuleType):
            wrapped = _Namespace(f"{self.__name__}.{name}", attr)
        elif isinstance(attr, type) or not callable(attr):
            wrapped = attr              # dtypes, constants, np.newaxis, ...
        else:
            wrapped = (lambda f: lambda *a, **k: _device_call(f, a, k))(attr)
        setattr(self, name, wrapped)
        return wrapped


module = _Namespace("cupy", np)
module.asarray = _to_device(np.asarray)
module.array = _to_device(np.array)
module.ascontiguousarray = _to_device(np.ascontiguousarray)
module.ndarray = DeviceArray
module.random = _Namespace("cupy.random", np.random)
module.random.default_rng = _Generator
module.asnumpy = lambda a: a.get() if isinstance(a, DeviceArray) else np.asarray(a)
