"""Importing ONNX files laid out as PyTorch's exporter writes them (built here with
onnx.helper): the imported ``infer`` matches onnxruntime, the initializers are trainable
parameters that a subclass fine-tunes, and untrusted or unsupported content is a clear
error."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import onnx, ort_run

H, TP = onnx.helper, onnx.TensorProto
RNG = np.random.default_rng(7)


def _init(name, *shape, positive=False):
    value = RNG.standard_normal(shape).astype(np.float32) * 0.3
    return onnx.numpy_helper.from_array(np.abs(value) + 0.5 if positive else value, name)


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = H.make_graph(nodes, "main_graph", inputs, outputs, initializer=inits)
    model = H.make_model(graph, opset_imports=[H.make_opsetid("", opset)],
                         producer_name="pytorch", ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _save(model, tmp_path, name):
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def torch_mlp():
    """Linear-ReLU-Dropout-Linear-Tanh-Linear-Softmax, as torch.onnx.export lays it out."""
    nodes = [
        H.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["/fc1/Gemm_output_0"],
                    name="/fc1/Gemm", alpha=1.0, beta=1.0, transB=1),
        H.make_node("Relu", ["/fc1/Gemm_output_0"], ["/act/Relu_output_0"], name="/act/Relu"),
        H.make_node("Dropout", ["/act/Relu_output_0"], ["/drop/Dropout_output_0"],
                    name="/drop/Dropout"),
        H.make_node("Gemm", ["/drop/Dropout_output_0", "fc2.weight", "fc2.bias"],
                    ["/fc2/Gemm_output_0"], name="/fc2/Gemm", transB=1),
        H.make_node("Tanh", ["/fc2/Gemm_output_0"], ["/act2/Tanh_output_0"]),
        H.make_node("Identity", ["/act2/Tanh_output_0"], ["/id/Identity_output_0"]),
        H.make_node("MatMul", ["/id/Identity_output_0", "onnx::MatMul_20"],
                    ["/fc3/MatMul_output_0"], name="/fc3/MatMul"),
        H.make_node("Add", ["fc3.bias", "/fc3/MatMul_output_0"], ["/fc3/Add_output_0"]),
        H.make_node("Softmax", ["/fc3/Add_output_0"], ["output"], axis=1),
    ]
    inits = [_init("fc1.weight", 16, 64), _init("fc1.bias", 16), _init("fc2.weight", 12, 16),
             _init("fc2.bias", 12), _init("onnx::MatMul_20", 12, 10), _init("fc3.bias", 10)]
    return _model(nodes, [H.make_tensor_value_info("input", TP.FLOAT, ["batch_size", 64])],
                  [H.make_tensor_value_info("output", TP.FLOAT, ["batch_size", 10])], inits)


def torch_cnn(head="flatten"):
    """Conv-BN-ReLU-MaxPool-Conv-Sigmoid-AveragePool, then Flatten (or a Reshape to a
    Constant shape, or GlobalAveragePool) and a Linear layer."""
    nodes = [
        H.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["/conv1/Conv_output_0"],
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1],
                    group=1, name="/conv1/Conv"),
        H.make_node("BatchNormalization", ["/conv1/Conv_output_0", "bn1.weight", "bn1.bias",
                                           "bn1.running_mean", "bn1.running_var"],
                    ["/bn1/BatchNormalization_output_0"], epsilon=1e-5, momentum=0.9),
        H.make_node("Relu", ["/bn1/BatchNormalization_output_0"], ["/relu/Relu_output_0"]),
        H.make_node("MaxPool", ["/relu/Relu_output_0"], ["/pool/MaxPool_output_0"],
                    kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=0),
        H.make_node("Conv", ["/pool/MaxPool_output_0", "conv2.weight", "conv2.bias"],
                    ["/conv2/Conv_output_0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                    strides=[1, 1]),
        H.make_node("Sigmoid", ["/conv2/Conv_output_0"], ["/act/Sigmoid_output_0"]),
        H.make_node("AveragePool", ["/act/Sigmoid_output_0"], ["/pool2/AveragePool_output_0"],
                    kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0]),
    ]
    pooled = "/pool2/AveragePool_output_0"
    features, width = "/flatten/Flatten_output_0", 6 * 2 * 2
    if head == "flatten":
        nodes.append(H.make_node("Flatten", [pooled], [features], axis=1))
    elif head == "reshape":
        nodes += [H.make_node("Constant", [], ["/Constant_output_0"],
                              value=onnx.numpy_helper.from_array(
                                  np.array([-1, width], np.int64), "shape")),
                  H.make_node("Reshape", [pooled, "/Constant_output_0"], [features])]
    else:
        width = 6
        nodes += [H.make_node("GlobalAveragePool", [pooled], ["/gap/Gap_output_0"]),
                  H.make_node("Flatten", ["/gap/Gap_output_0"], [features])]
    nodes.append(H.make_node("Gemm", [features, "fc.weight", "fc.bias"], ["output"], transB=1))
    inits = [_init("conv1.weight", 4, 1, 3, 3), _init("conv1.bias", 4),
             _init("bn1.weight", 4, positive=True), _init("bn1.bias", 4),
             _init("bn1.running_mean", 4), _init("bn1.running_var", 4, positive=True),
             _init("conv2.weight", 6, 4, 3, 3), _init("conv2.bias", 6),
             _init("fc.weight", 10, width), _init("fc.bias", 10)]
    return _model(nodes, [H.make_tensor_value_info("input", TP.FLOAT, ["N", 1, 8, 8])],
                  [H.make_tensor_value_info("output", TP.FLOAT, ["N", 10])], inits)


@pytest.mark.parametrize("build", [torch_mlp, torch_cnn, lambda: torch_cnn("reshape"),
                                   lambda: torch_cnn("gap")],
                         ids=["mlp", "cnn", "cnn-reshape", "cnn-gap"])
def test_pytorch_layout_imports_and_matches_onnxruntime(build, tmp_path):
    model = build()
    path = _save(model, tmp_path, "model.onnx")
    net = fluid.import_onnx(path)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    params = net.parameters()
    for init in model.graph.initializer:
        if "running" not in init.name:   # batch norm statistics are state, not parameters
            np.testing.assert_array_equal(params[init.name],
                                          onnx.numpy_helper.to_array(init))
    for batch in (1, 7):
        x = RNG.standard_normal([batch] + shape).astype(np.float32)
        want = ort_run(path, {"input": x})[0]
        np.testing.assert_allclose(net.infer(x), want, rtol=1e-5, atol=1e-5)
    assert "infer(input:f32[?," in str(net)


def test_fine_tune_replaces_the_last_layer(tmp_path):
    """The documented pattern: a subclass trains a new head on the imported layers; the
    imported parameters train too, and infer keeps the original head."""
    path = _save(torch_cnn(), tmp_path, "cnn.onnx")
    Base = fluid.onnx_program(path)
    assert "/flatten/Flatten_output_0" in Base.onnx_values()

    class FineTune(Base):
        @fluid.network("input", "label")
        def train_step(self, input, label):
            image = fluid.layers.data("input", shape=[1, 8, 8])
            label = fluid.layers.data("label", shape=[1], dtype="int64")
            features = self.onnx_graph(image, outputs="/flatten/Flatten_output_0")
            with fluid.var_scope("head"):
                logits = fluid.layers.fc(features, size=3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
            fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
            return loss

    net = FineTune().Compile(seed=0)
    assert "fc.weight" not in str(net.train_step)   # the old head is not replayed
    x = RNG.standard_normal((32, 1, 8, 8)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) > 0).astype(np.int64).reshape(-1, 1)
    before = net.parameters()
    losses = [net.train_step(x, y) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    after = net.parameters()
    assert not np.allclose(after["conv1.weight"], before["conv1.weight"])
    np.testing.assert_array_equal(after["fc.weight"], before["fc.weight"])
    assert not np.allclose(net.get_var("bn1.running_mean"), before.get(
        "bn1.running_mean", onnx.numpy_helper.to_array(torch_cnn().graph.initializer[4])))
    assert net.infer(x).shape == (32, 10)


def test_unsupported_node_types_are_listed_with_counts(tmp_path):
    nodes = [H.make_node("Round", ["x"], ["a"]), H.make_node("Round", ["a"], ["b"]),
             H.make_node("Relu", ["b"], ["c"]),
             H.make_node("Hardmax", ["c"], ["y"])]
    model = _model(nodes, [H.make_tensor_value_info("x", TP.FLOAT, ["N", 3])],
                   [H.make_tensor_value_info("y", TP.FLOAT, ["N", 3])], [])
    with pytest.raises(fluid.OnnxError, match=r"'Hardmax' x1, 'Round' x2"):
        fluid.import_onnx(_save(model, tmp_path, "bad.onnx"))


@pytest.mark.parametrize("bad", ["a\nb", "x\x1b[31m", "w@GRAD", ""])
def test_untrusted_names_are_rejected_clearly(bad, tmp_path):
    model = torch_mlp()
    model.graph.initializer[0].name = bad
    for node in model.graph.node:
        node.input[:] = [bad if n == "fc1.weight" else n for n in node.input]
    path = _save(model, tmp_path, "names.onnx")
    with pytest.raises(fluid.OnnxError, match="cannot become a var name|fails onnx.checker"
                       ) as info:
        fluid.import_onnx(path)
    assert "\x1b" not in str(info.value) and "\nb" not in str(info.value)


def test_a_file_that_is_not_onnx(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x08\x01garbage that is not a protobuf \xff\xff\xff")
    with pytest.raises(fluid.OnnxError, match="not a readable ONNX model"):
        fluid.import_onnx(str(path))


def test_external_data_is_refused(tmp_path):
    model = torch_mlp()
    init = model.graph.initializer[0]
    init.data_location = TP.EXTERNAL
    init.ClearField("raw_data")
    init.ClearField("float_data")
    entry = init.external_data.add()
    entry.key, entry.value = "location", "../../outside.bin"
    path = str(tmp_path / "ext.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    with pytest.raises(fluid.OnnxError, match="external file"):
        fluid.import_onnx(path)


def test_symbolic_dims_anywhere_take_any_size_and_a_fixed_first_dim_stays_fixed(tmp_path):
    """[T, N, 3] with both leading dims symbolic, beside a [1] input whose size the file
    fixes: the first takes any T and N, the second stays one value (it is not a batch)."""
    nodes = [H.make_node("Mul", ["x", "s"], ["y"])]
    model = _model(nodes, [H.make_tensor_value_info("x", TP.FLOAT, ["T", "N", 3]),
                           H.make_tensor_value_info("s", TP.FLOAT, [1])],
                   [H.make_tensor_value_info("y", TP.FLOAT, ["T", "N", 3])], [])
    prog = fluid.import_onnx(_save(model, tmp_path, "dims.onnx"))
    block = prog.program.block("infer")
    assert block.vars["x"].shape == (-1, -1, 3) and block.vars["s"].shape == (1,)
    for t, n in ((2, 5), (7, 1)):
        x = np.arange(t * n * 3, dtype=np.float32).reshape(t, n, 3)
        np.testing.assert_array_equal(prog.infer(x, np.array([2.0], np.float32)), 2 * x)


def test_a_static_file_takes_any_batch_size(tmp_path):
    """Every input fixes its first dim (a static export at batch 4): any batch runs."""
    nodes = [H.make_node("Relu", ["x"], ["y"])]
    model = _model(nodes, [H.make_tensor_value_info("x", TP.FLOAT, [4, 3])],
                   [H.make_tensor_value_info("y", TP.FLOAT, [4, 3])], [])
    prog = fluid.import_onnx(_save(model, tmp_path, "static.onnx"))
    x = -np.ones((9, 3), np.float32)
    np.testing.assert_array_equal(prog.infer(x), np.zeros((9, 3), np.float32))
