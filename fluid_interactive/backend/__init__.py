"""The array module: NumPy everywhere, CuPy on a GPU. Nothing else knows which is active.

`set_device('cpu'|'gpu'|'auto')` (or the ``FLUID_DEVICE`` environment variable) chooses;
`auto` takes CuPy when it imports and sees a GPU, otherwise NumPy with a one-time notice.
"""
from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import Any

import numpy as np

from .threads import get_threads, set_threads

_DEVICES = ("cpu", "gpu", "auto")
_state: dict[str, Any] = {"device": None, "xp": None, "notified": False}


def _cupy_with_gpu() -> ModuleType | None:
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # ImportError, or a CUDA runtime without a device
        return None
    return None


def resolve_device(device: str) -> str:
    """'cpu' or 'gpu' for a device name: 'auto' takes the GPU when CuPy sees one, otherwise
    the CPU with a one-time notice; 'gpu' without CuPy and a GPU is an error."""
    if device not in _DEVICES:
        raise ValueError(f"device must be one of {_DEVICES}, got {device!r}")
    if device == "cpu":
        return "cpu"
    if _cupy_with_gpu() is not None:
        return "gpu"
    if device == "gpu":
        raise RuntimeError("set_device('gpu'): CuPy is not installed or sees no GPU; "
                           "install the 'gpu' extra on a machine with CUDA, or use 'cpu'")
    if not _state["notified"]:
        warnings.warn("fluid: no usable GPU (CuPy missing or no device); running on NumPy",
                      RuntimeWarning, stacklevel=3)
        _state["notified"] = True
    return "cpu"


def set_device(device: str) -> str:
    """Choose where kernels run; returns the device actually chosen ('cpu' or 'gpu')."""
    chosen = resolve_device(device)
    _state.update(device=chosen, xp=array_module_for(chosen))
    return chosen


def get_device() -> str:
    if _state["device"] is None:
        set_device(os.environ.get("FLUID_DEVICE", "cpu"))
    return _state["device"]


def array_module() -> ModuleType:
    """The module kernels call: numpy or cupy."""
    if _state["xp"] is None:
        get_device()
    return _state["xp"]


def array_module_for(device: str) -> ModuleType:
    """The array module of a device ('cpu', 'gpu' or 'auto')."""
    if resolve_device(device) == "cpu":
        return np
    cupy = _cupy_with_gpu()
    assert cupy is not None, "resolve_device chose 'gpu' because CuPy sees one"
    return cupy


def to_host(array: Any) -> np.ndarray:
    """A NumPy array for any backend array (a no-op for NumPy)."""
    if isinstance(array, np.ndarray):
        return array
    get = getattr(array, "get", None)
    return get() if get is not None else np.asarray(array)


def to_device(array: Any, xp: ModuleType) -> Any:
    return array if xp is np else xp.asarray(array)


__all__ = ["set_device", "get_device", "set_threads", "get_threads", "resolve_device",
           "array_module", "array_module_for", "to_host", "to_device"]
