"""ONNX input built to hurt: named pipes, devices and links instead of files, files that
`onnx.checker` refuses, malformed nodes and tensors, the memory an import takes, and a
fuzz of thousands of mutated models in child processes under a memory limit. Every case
ends in a clean `fluid.OnnxError` naming what is wrong, or imports and runs."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import onnx, ort_run
from tests.onnx_io.test_import import torch_cnn, torch_mlp

from .bounded import call_within, finish, release_fifo

H, TP = onnx.helper, onnx.TensorProto
ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ_CASES = 1500          # per child; two children run side by side
FUZZ_MEMORY_MB = 1024      # each child's headroom over what it uses after its imports
LINUX = sys.platform.startswith("linux")


def _save(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return str(path)


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "extension")]))




# --- not a regular file ------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    try:
        for load in (fluid.import_onnx, fluid.onnx_program):
            with pytest.raises(fluid.OnnxError, match="is a named pipe; ONNX models are read "
                                                      "from regular files only"):
                call_within(20, load, str(fifo))
    finally:
        release_fifo(fifo)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_devices_and_links_are_refused(tmp_path):
    with pytest.raises(fluid.OnnxError, match="is a character device"):
        call_within(20, fluid.import_onnx, "/dev/zero")
    to_zero = tmp_path / "zero.onnx"
    to_zero.symlink_to("/dev/zero")
    with pytest.raises(fluid.OnnxError, match="is a symbolic link"):
        call_within(20, fluid.import_onnx, str(to_zero))
    real = _save(torch_mlp(), tmp_path)
    to_real = tmp_path / "link.onnx"
    to_real.symlink_to(real)
    with pytest.raises(fluid.OnnxError, match=r"os\.path\.realpath"):
        fluid.import_onnx(str(to_real))
    assert fluid.import_onnx(os.path.realpath(to_real)).infer(np.ones((1, 64), "f")).shape \
        == (1, 10)
    with pytest.raises(fluid.OnnxError, match="is a directory"):
        fluid.import_onnx(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        fluid.import_onnx(str(tmp_path / "absent.onnx"))


# --- what onnx.checker and onnxruntime refuse -------------------------------------------------

def _with_attribute(model, op_type, name, value):
    node = next(n for n in model.graph.node if n.op_type == op_type)
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(H.make_attribute(name, value))
    return model


@pytest.mark.parametrize("op_type, name, value, problem", [
    ("Relu", "foo", 1, "Unrecognized attribute: foo for operator Relu"),
    ("Softmax", "axis", 7, "'axis' must be in"),
    ("Conv", "strides", [0, 0], "strides must only contain positive values"),
    ("MaxPool", "kernel_shape", [0, 0], "kernel_shape must only contain positive values"),
    ("Conv", "pads", [-5, -5, -5, -5], "pads must not contain negative values"),
])
def test_what_the_checker_and_onnxruntime_refuse_is_refused(tmp_path, op_type, name, value,
                                                            problem):
    model = torch_mlp() if op_type in ("Relu", "Softmax") else torch_cnn()
    path = _save(_with_attribute(model, op_type, name, value), tmp_path)
    with pytest.raises(Exception):   # noqa: B017  (onnxruntime's own error types)
        feed = np.ones([1] + [d.dim_value for d in
                              model.graph.input[0].type.tensor_type.shape.dim[1:]], "f")
        ort_run(path, {"input": feed})
    with pytest.raises(fluid.OnnxError, match="fails onnx.checker") as info:
        fluid.import_onnx(path)
    assert problem in str(info.value) and op_type in str(info.value)


# --- malformed content the checker lets through -----------------------------------------------

def _mutated(build, change):
    model = build()
    change(model)
    return model


def _set_group(model, value):
    _with_attribute(model, "Conv", "group", value)


def _truncate_initializer(model):
    t = model.graph.initializer[0]
    t.raw_data = t.raw_data[:-4] if t.raw_data else b""
    if not t.raw_data:
        t.float_data[:] = t.float_data[:-1]


def _constant_of_wrong_kind(model):
    node = next(n for n in model.graph.node if n.op_type == "Constant")
    node.attribute[0].CopyFrom(H.make_attribute("value_ints", [1, 2]))
    node.attribute[0].name = "value_float"


def _duplicate_input(model):
    model.graph.input.add().CopyFrom(model.graph.input[0])


def _deep_returns(model):
    from fluid_interactive.onnx.export import RETURNS_KEY
    entry = model.metadata_props.add()
    entry.key, entry.value = RETURNS_KEY, "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("build, change, message", [
    (torch_cnn, lambda m: _set_group(m, 0), r"node 0 \(Conv, '/conv1/Conv'\) could not "
                                            r"become conv2d: .*groups must be a positive"),
    (torch_cnn, lambda m: _set_group(m, 3), r"node 0 \(Conv, '/conv1/Conv'\) .*groups=3 "
                                            r"does not divide"),
    (torch_mlp, _truncate_initializer, r"initializer 'fc1\.weight' holds 4092 bytes of data; "
                                       r"dims \[16, 64\] of float32 need 4096"),
    (lambda: torch_cnn("reshape"), _constant_of_wrong_kind,
     r"node 7 \(Constant\) has a value_float attribute that is not a float32|"
     r"fails onnx.checker"),
    (torch_mlp, _duplicate_input, r"graph input 'input' is defined twice|fails onnx.checker"),
], ids=["group-0", "group-3", "short-initializer", "constant-kind", "duplicate-input"])
def test_malformed_files_name_the_part_at_fault(tmp_path, build, change, message):
    path = _save(_mutated(build, change), tmp_path)
    with pytest.raises(fluid.OnnxError, match=message):
        fluid.import_onnx(path)


def test_malformed_nodes_are_refused_even_without_the_checker(tmp_path, monkeypatch):
    """The importer's own checks do not rely on onnx.checker."""
    from fluid_interactive.onnx import import_graph
    monkeypatch.setattr(import_graph, "_checker_failure", lambda data: None)
    for op_type, name, value, problem in [
            ("Conv", "strides", [0, 0], r"node 0 \(Conv, '/conv1/Conv'\)"),
            ("Softmax", "axis", 2 ** 62, r"node 8 \(Softmax\) could not become softmax"),
            ("Flatten", "axis", "x", r"node 7 \(Flatten\) is malformed"),
            ("Gemm", "alpha", [1.0, 2.0], r"node 8 \(Gemm\) is malformed")]:
        model = torch_mlp() if op_type == "Softmax" else torch_cnn()
        path = _save(_with_attribute(model, op_type, name, value), tmp_path)
        with pytest.raises(fluid.OnnxError, match=problem):
            fluid.import_onnx(path)


def test_a_return_structure_nested_too_deep_is_ignored(tmp_path):
    """The structure our exporter records is a hint: one that cannot be read gives the
    plain outputs."""
    prog = fluid.import_onnx(_save(_mutated(torch_mlp, _deep_returns), tmp_path))
    assert prog.infer(np.ones((2, 64), "f")).shape == (2, 10)


# --- memory ---------------------------------------------------------------------------------

_MEMORY_PROBE = """
import os, sys
import fluid
from fluid_interactive.onnx import proto
proto.onnx_module()                           # the onnx package's own memory is not the file's

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":")) << 10

path = sys.argv[1]
size = os.path.getsize(path)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                             # the peak (VmHWM) starts again from here
before = status("VmRSS")
cls = fluid.onnx_program(path)
print((status("VmHWM") - before) / size, (status("VmRSS") - before) / size)
"""


def _big_model(unused: bool):
    """A MatMul by a 32 MiB table, or by a small one beside a 32 MiB table no node reads."""
    n = 2896
    big = onnx.numpy_helper.from_array(np.ones((n, n), np.float32), "big" if unused else "w")
    inits = [onnx.numpy_helper.from_array(np.ones((8, n), np.float32), "w"), big] if unused \
        else [big]
    rows = 8 if unused else n
    graph = H.make_graph([H.make_node("MatMul", ["x", "w"], ["y"])], "g",
                         [H.make_tensor_value_info("x", TP.FLOAT, ["N", rows])],
                         [H.make_tensor_value_info("y", TP.FLOAT, ["N", n])],
                         initializer=inits)
    return H.make_model(graph, opset_imports=[H.make_opsetid("", 17)])


@pytest.mark.skipif(not LINUX, reason="reads /proc")
@pytest.mark.parametrize("kind", ["used", "unused"])
def test_reading_takes_about_two_copies_of_the_file_and_keeps_only_what_is_used(tmp_path,
                                                                               kind):
    """The peak is the file's bytes and their parse (the checker sees the model without
    its large tensors); an initializer no node reads is never converted or kept."""
    path = _save(_big_model(kind == "unused"), tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", _MEMORY_PROBE, path], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak, kept = map(float, finish(proc, timeout=300).split())
    print(f"{kind}: peak {peak:.2f}x the file, kept {kept:.2f}x")
    assert peak < 2.4
    assert kept < (0.3 if kind == "unused" else 1.3)


# --- the fuzz ---------------------------------------------------------------------------------

@pytest.mark.skipif(not LINUX, reason="uses /proc and RLIMIT_AS")
def test_fuzz_of_thousands_of_mutated_models_under_a_memory_limit():
    """One child with onnx.checker, one with it passing everything: the importer's own
    checks must hold by themselves."""
    procs = [subprocess.Popen([sys.executable, "-m", "tests.adversarial.hostile_onnx",
                               str(FUZZ_CASES), str(seed), str(FUZZ_MEMORY_MB), *extra],
                              cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for seed, extra in ((1, []), (2, ["no-checker"]))]
    results = [json.loads(finish(p)) for p in procs]
    keys = ("cases", "refused", "imported", "ran", "failed at run time")
    total = {k: sum(r[k] for r in results) for k in keys}
    other = [line for r in results for line in r["other"]]
    print("ONNX fuzz: " + ", ".join(f"{total[k]} {k}" for k in keys) + f", {len(other)} other")
    assert other == []
    assert total["cases"] == 2 * FUZZ_CASES
    assert total["refused"] + total["imported"] + total["ran"] + total["failed at run time"] \
        == total["cases"]
    assert total["ran"] >= FUZZ_CASES // 20   # the mutations leave many models runnable
