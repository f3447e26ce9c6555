"""Running ops on a device array module, for the op-test harness.

By default the module is the CuPy stand-in of ``tests/device_standin.py`` (on the host,
no GPU needed); ``FLUID_TEST_DEVICE=cupy`` runs the same checks on CuPy and a real GPU.
`run_on_device` moves an op list's inputs to the device, prepares each kernel, runs it
and checks that

* running a kernel moves no array between host and device (preparing one may: that
  happens once per plan) and reads no device value back as a Python number, except as
  the op's spec declares in ``host_access`` (``ops/spec.py``: a bounds check of integer
  inputs, initialisers that run once when a program compiles);
* the results, brought back once at the end, equal the host run's (ops that draw random
  numbers: same shapes and dtypes; their draws differ between generators).

Every op type that ran is recorded in `COVERED`; tests/ops/test_zz_device_coverage.py
checks that every registered op with a kernel ran.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import get_spec, infer_op
from fluid_interactive.ops.apply import flat_inputs, flat_outputs, prepare_kernel
from fluid_interactive.ops.spec import Forward, TensorType
from fluid_interactive.util.selected_rows import SelectedRows

COVERED: set[str] = set()
REAL_CUPY = os.environ.get("FLUID_TEST_DEVICE") == "cupy"


def device_module() -> Any:
    if REAL_CUPY:
        import cupy
        return cupy
    from device_standin import module
    return module


def _transfers() -> Any:
    if REAL_CUPY:
        import contextlib
        return contextlib.nullcontext({})
    from device_standin import counting
    return counting()


def _type(a: Any) -> TensorType:
    kind = "selected_rows" if isinstance(a, SelectedRows) else "tensor"
    return TensorType(tuple(a.shape), np.dtype(a.dtype).name, kind)


def _to_device(xp: Any, v: Any) -> Any:
    if isinstance(v, SelectedRows):
        return SelectedRows(xp.asarray(v.rows), xp.asarray(v.values), v.height)
    return xp.asarray(np.asarray(v))


def run_on_device(ops: Sequence[OpDesc], host_inputs: Mapping[str, Any],
                  host_results: MutableMapping[str, Any]) -> None:
    xp = device_module()
    env = {n: _to_device(xp, v) for n, v in host_inputs.items()}
    random = False
    for op in ops:
        spec = get_spec(op.type)
        random |= spec.random
        known = {n: _type(env[n]) for n in op.input_names()}
        out_types = infer_op(op, known.__getitem__)
        types = dict(known)
        for slot, names in op.outputs.items():
            types.update(zip(names, out_types[slot]))
        fn = prepare_kernel(op, types.__getitem__, xp, rng=np.random.default_rng(0))
        args = [env[n] for n in flat_inputs(spec, op)]
        with _transfers() as moved:
            result = args[fn.input_index] if isinstance(fn, Forward) else fn(*args)
        allowed = {"reads": {"sync"}, "draws": {"to_device"},
                   "io": {"to_host"},
                   "python": {"to_host", "to_device"}}.get(spec.host_access, set())
        crossings = {k: v for k, v in moved.items() if v and k not in allowed}
        assert not crossings, (f"{op.type}: its kernel moved data between host and device "
                               f"({crossings}); keep every array on the device "
                               f"(xp.*, not np.*)")
        outs = flat_outputs(spec, op)
        for name, value in zip(outs, (result,) if len(outs) == 1 else tuple(result)):
            assert not isinstance(value, np.ndarray), (
                f"{op.type}: output {name} came back as a host numpy.ndarray")
            env[name] = value
        COVERED.add(op.type)
    for op in ops:
        for name in flat_outputs(get_spec(op.type), op):
            for got, want in _parts(env[name], host_results[name]):
                _same(op, name, got, want, random)


def _parts(value: Any, host: Any) -> list[tuple[Any, Any]]:
    """(device part, host part) pairs: a rows-only value compares rows and values."""
    if isinstance(host, SelectedRows):
        assert isinstance(value, SelectedRows) and value.height == host.height
        return [(value.rows, host.rows), (value.values, host.values)]
    return [(value, host)]


def _same(op: OpDesc, name: str, value: Any, host: Any, random: bool) -> None:
    got, want = value.get(), np.asarray(host)
    assert got.shape == want.shape and got.dtype == want.dtype, (
        op.type, name, got.shape, got.dtype, want.shape, want.dtype)
    if not random:
        np.testing.assert_allclose(got, want, rtol=1e-4 if REAL_CUPY else 1e-6,
                                   atol=1e-6, err_msg=f"{op.type} {name} on device")
