"""Hostile ONNX files: a seeded fuzz of mutations of real models, structural (attributes,
wiring, initializers, inputs, opsets, metadata) and byte-level. Used by
test_onnx_hostile.py, which runs it in child processes under a memory limit (``python -m
tests.adversarial.hostile_onnx CASES SEED MEMORY_MB`` from the project's root prints the
counts as JSON).

Every case must end in a clean `OnnxError` from the import, or import and run: a failure
of the run itself may be any `FluidError` (the mutated graph computes something else, on
random data), never another exception.
"""
import json
import os
import sys
import tempfile
import traceback

import numpy as np
import onnx

import fluid
from fluid_interactive.errors import FluidError, OnnxError

H, TP = onnx.helper, onnx.TensorProto
_WEIRD_INTS = [0, -1, -7, 1, 2, 3, 5, 2 ** 31, 2 ** 62, -(2 ** 62)]
_WEIRD_FLOATS = [0.0, -1.0, 1e-30, 1e30, float("nan"), float("inf"), -float("inf")]


def _exported(build, feeds):
    """A model that `fluid.export_onnx` writes for a one-method program."""
    def infer(self, *args):
        xs = [fluid.layers.data(n, shape=list(s), dtype=d) for n, (s, d) in feeds.items()]
        return build(*xs)
    cls = type("Net", (fluid.Program,), {"infer": fluid.network(*feeds)(infer)})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        fluid.export_onnx(cls().Compile(seed=0), path)
        return onnx.load(path)


def base_models() -> list:
    """Models to mutate: PyTorch's layouts (built with onnx.helper) and our exports."""
    from tests.onnx_io.test_import import torch_cnn, torch_mlp
    layers = fluid.layers
    img = {"x": ([1, 6, 6], "float32")}
    return [
        torch_mlp(), torch_cnn(), torch_cnn("reshape"), torch_cnn("gap"),
        _exported(lambda x: layers.softmax(layers.fc(layers.fc(x, 8, act="tanh"), 3)),
                  {"x": ([5], "float32")}),
        _exported(lambda x: layers.pool2d(layers.batch_norm(layers.conv2d(
            x, 3, 3, padding=1, act="relu")), 2, pool_stride=2), img),
        _exported(lambda x: layers.layer_norm(layers.concat(
            [layers.scale(x, 2.0, 1.0), layers.clip(x, -0.5, 0.5)], axis=1)),
            {"x": ([4], "float32")}),
        _exported(lambda ids: layers.reduce_mean(layers.embedding(ids, [10, 4]), dim=[1]),
                  {"ids": ([3, 1], "int64")}),
        _exported(lambda x: layers.transpose(layers.reshape(layers.split(
            x, 2, dim=1)[0], [-1, 2, 2]), [0, 2, 1]), {"x": ([8], "float32")}),
    ]


# ------------------------------------------------------------------ the mutations

def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _mutate_attribute(rng, model):
    nodes = [n for n in model.graph.node if len(n.attribute)]
    if not nodes:
        return "attribute (none)"
    attr = _pick(rng, _pick(rng, nodes).attribute)
    choice = int(rng.integers(6))
    if attr.type == onnx.AttributeProto.INTS and choice < 3:
        values = [int(_pick(rng, _WEIRD_INTS)) for _ in range(int(rng.integers(0, 6)))]
        attr.ClearField("ints")
        attr.ints.extend(values)
    elif attr.type == onnx.AttributeProto.INT and choice < 3:
        attr.i = int(_pick(rng, _WEIRD_INTS))
    elif attr.type in (onnx.AttributeProto.FLOAT, onnx.AttributeProto.FLOATS) and choice < 3:
        attr.f = float(_pick(rng, _WEIRD_FLOATS))
        attr.floats[:] = [float(_pick(rng, _WEIRD_FLOATS)) for _ in range(len(attr.floats))]
    elif choice == 3:   # the wrong kind of value
        attr.type = _pick(rng, [onnx.AttributeProto.STRING, onnx.AttributeProto.INTS,
                                onnx.AttributeProto.FLOAT, onnx.AttributeProto.TENSOR])
        attr.s = b"\xff\x00weird"
    elif choice == 4:
        attr.name = _pick(rng, ["", "axis", "perm", "pads", "to", "shape", "x" * 300])
    else:
        attr.type = onnx.AttributeProto.GRAPH   # a subgraph nobody asked for
        graph = onnx.GraphProto()
        graph.CopyFrom(model.graph)   # (copying a message into itself would crash protobuf)
        attr.g.CopyFrom(graph)
    return f"attribute {attr.name!r}"


def _mutate_wiring(rng, model):
    g = model.graph
    node = _pick(rng, g.node)
    names = [v for n in g.node for v in n.output] + [i.name for i in g.input] + \
        [t.name for t in g.initializer] + ["", "nowhere", node.output[0] if node.output else "o"]
    choice = int(rng.integers(5))
    if choice == 0 and len(node.input):
        node.input[int(rng.integers(len(node.input)))] = _pick(rng, names)
    elif choice == 1 and len(node.input):
        del node.input[int(rng.integers(len(node.input)))]
    elif choice == 2:
        node.input.append(_pick(rng, names))
    elif choice == 3 and len(node.output):
        node.output[0] = _pick(rng, names)
    else:   # two nodes swap places: a graph that is not sorted
        i, j = rng.integers(len(g.node), size=2)
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(g.node[int(i)])
        b.CopyFrom(g.node[int(j)])
        g.node[int(i)].CopyFrom(b)
        g.node[int(j)].CopyFrom(a)
    return f"wiring of {node.op_type}"


def _mutate_initializer(rng, model):
    g = model.graph
    if not len(g.initializer):
        return "initializer (none)"
    t = _pick(rng, g.initializer)
    choice = int(rng.integers(7))
    if choice == 0:
        t.dims[:] = [int(_pick(rng, [0, 1, 3, 7, 2 ** 31, 2 ** 40, -2]))
                     for _ in range(int(rng.integers(0, 4)))]
    elif choice == 1:
        t.data_type = int(_pick(rng, [0, TP.STRING, TP.COMPLEX64, TP.BFLOAT16, TP.INT8,
                                      TP.DOUBLE, 77]))
    elif choice == 2 and t.raw_data:
        t.raw_data = t.raw_data[:int(rng.integers(len(t.raw_data)))]
    elif choice == 3:
        t.data_location = TP.EXTERNAL
        t.ClearField("raw_data")
        location = _pick(rng, ["../../etc/passwd", "/dev/zero", "m.onnx", "", "sub/x.bin",
                               "missing.bin", "a\x00b"])
        for key, value in (("location", location),
                           ("offset", str(_pick(rng, [0, -1, 2 ** 62, 7]))),
                           ("length", str(_pick(rng, [0, 4, 2 ** 62, -3])))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    elif choice == 4:
        t.name = _pick(rng, [g.input[0].name, g.node[0].output[0], "w\n", "dup"])
    elif choice == 5:
        g.initializer.add().CopyFrom(t)   # the same name twice
    else:
        t.raw_data = bytes(len(t.raw_data)) if t.raw_data else b""
        t.float_data[:] = [float("nan")] * 3
    return f"initializer {t.name!r}"


def _mutate_input(rng, model):
    v = _pick(rng, model.graph.input)
    tt = v.type.tensor_type
    choice = int(rng.integers(4))
    if choice == 0 and len(tt.shape.dim) > 1:
        tt.shape.dim[int(rng.integers(1, len(tt.shape.dim)))].dim_value = \
            int(_pick(rng, [0, 1, 2 ** 40, 7]))
    elif choice == 1:
        tt.elem_type = int(_pick(rng, [TP.STRING, TP.INT32, TP.DOUBLE, TP.UINT64, 0]))
    elif choice == 2:
        tt.shape.ClearField("dim")
    else:
        model.graph.input.add().CopyFrom(v)
    return f"input {v.name!r}"


def _mutate_model(rng, model):
    choice = int(rng.integers(4))
    if choice == 0:
        model.opset_import[0].version = int(_pick(rng, [1, 8, 10, 12, 22, 99, 2 ** 40]))
    elif choice == 1:
        from fluid_interactive.onnx.export import RETURNS_KEY
        entry = model.metadata_props.add()
        entry.key = RETURNS_KEY
        entry.value = _pick(rng, ["[" * 100000 + "]" * 100000, '{"a": 3}', "[[[]]]", "x"])
    elif choice == 2:
        del model.graph.output[:]
    else:
        node = _pick(rng, model.graph.node)
        node.op_type = _pick(rng, ["Relu", "Gemm", "Conv", "Reshape", "Softmax", "Gather",
                                   "Concat", "Split", "MaxPool", "Clip", "Slice", "Squeeze",
                                   "Cast", "BatchNormalization", "Transpose", "Sum"])
    return "model"


def _mutate_bytes(rng, data: bytes) -> bytes:
    n = len(data)
    kind = int(rng.integers(4))
    if kind == 0:
        out = bytearray(data)
        for pos in rng.integers(0, n, size=rng.integers(1, 4)):
            out[pos] ^= int(rng.integers(1, 256))
        return bytes(out)
    if kind == 1:
        return data[:rng.integers(0, n)]
    if kind == 2:
        pos = int(rng.integers(0, n + 1))
        return data[:pos] + rng.bytes(int(rng.integers(1, 40))) + data[pos:]
    start = int(rng.integers(0, n))
    return data[:start] + data[start + int(rng.integers(1, n - start + 1)):]


_STRUCTURAL = [_mutate_attribute, _mutate_wiring, _mutate_initializer, _mutate_input,
               _mutate_model]


def mutated(rng, model) -> tuple[str, bytes]:
    """(what was mutated, the file's bytes)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if rng.integers(5) == 0:
        return "bytes", _mutate_bytes(rng, copy.SerializeToString())
    kinds = []
    for _ in range(int(rng.integers(1, 3))):
        kinds.append(_pick(rng, _STRUCTURAL)(rng, copy))
    return ", ".join(kinds), copy.SerializeToString()


# ------------------------------------------------------------------ running a case

def _feeds(prog):
    """Random inputs of batch 2 for ``infer``, or None when an input is too large to
    make (a mutated dim: the model imports, but nobody could feed it)."""
    rng = np.random.default_rng(0)
    feeds = []
    for name in prog.methods["infer"].block.feeds:
        var = prog.program.find_var(prog.methods["infer"].block, name)
        shape = [2] + list(var.shape[1:])
        if np.prod(shape, dtype=float) > 1e6:
            return None
        if var.dtype.startswith("int"):
            feeds.append(rng.integers(0, 3, size=shape).astype(var.dtype))
        else:
            feeds.append(rng.standard_normal(shape).astype(var.dtype))
    return feeds


def run_case(path: str) -> str:
    """'refused', 'imported' (inputs too large to feed), 'ran' or 'failed at run time';
    raises anything else."""
    try:
        prog = fluid.import_onnx(path)
    except OnnxError:
        return "refused"
    feeds = _feeds(prog)
    if feeds is None:
        return "imported"
    try:
        prog.infer(*feeds)
    except FluidError:
        return "failed at run time"
    return "ran"


def fuzz(cases: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    models = base_models()
    counts = {"cases": 0, "refused": 0, "imported": 0, "ran": 0, "failed at run time": 0,
              "other": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        for case in range(cases):
            what, data = mutated(rng, _pick(rng, models))
            with open(path, "wb") as f:
                f.write(data)
            counts["cases"] += 1
            try:
                counts[run_case(path)] += 1
            except Exception as e:
                where = traceback.extract_tb(e.__traceback__)[-1]
                counts["other"].append(f"case {case} ({what}): {type(e).__name__}: "
                                       f"{str(e)[:300]} at {where.filename}:{where.lineno}")
    return counts


def main(argv: list[str]) -> None:
    """``CASES SEED MEMORY_MB [no-checker]``: the fuzz, under a memory limit. With
    ``no-checker``, `onnx.checker` passes everything, so that the importer's own checks
    meet every mutation (they must hold without it)."""
    from .hostile_recordio import limit_memory
    cases, seed, memory_mb = int(argv[0]), int(argv[1]), int(argv[2])
    if argv[3:] == ["no-checker"]:
        from fluid_interactive.onnx import import_graph
        import_graph._checker_failure = lambda data: None
    base_models()   # imports and first compilations before the limit
    limit_memory(memory_mb)
    sys.setrecursionlimit(3000)
    print(json.dumps(fuzz(cases, seed)))


if __name__ == "__main__":
    main(sys.argv[1:])
