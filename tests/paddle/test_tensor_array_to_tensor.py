"""Paddle 1.8's test_tensor_array_to_tensor.py, ported: arrays joined (elements of
different sizes) and stacked, Paddle's OutIndex, gradients. The GPU run (test_gpu) is out
of scope, and dygraph runs become compiled methods (docs/paddle_tests.md)."""
import numpy
import pytest
from paddle.common import compile_fetches

import fluid

layers = fluid.layers


def test_errors():   # TestTensorArrayToTensorError
    def build():
        input_data = numpy.random.RandomState(0).random_sample((2, 4)).astype("float32")
        with pytest.raises(TypeError):
            fluid.layers.tensor_array_to_tensor(input=input_data)
        with pytest.raises(TypeError):
            fluid.layers.tensor_array_to_tensor(input=[input_data])
        return [layers.fill_constant(shape=[1], dtype='int64', value=0)]
    compile_fetches(build)()


def test_get_set():   # TestLoDTensorArrayConcat: concat mode, elements of two sizes
    random_grad = numpy.random.RandomState(0).random_sample([11]).astype(numpy.float32)

    def build():
        elements = []
        array = layers.create_array("float32")
        for i in range(10):
            value = [[i], [i]] if i == 0 else [[i]]
            elements.append(layers.assign(numpy.array(value, dtype='float32')))
            elements[-1].stop_gradient = False
            layers.array_write(elements[-1], layers.fill_constant([1], "int64", i), array)
        out, out_index = layers.tensor_array_to_tensor(array, axis=0)
        # Out@GRAD = random_grad: the gradient of sum(Out * random_grad)
        weighted = layers.reduce_sum(
            out * layers.assign(random_grad.reshape(11, 1)))
        return [out, out_index, *fluid.gradients(weighted, elements)]
    outs = compile_fetches(build)()
    tensor_res, tensor_res_out_idx, grads = outs[0].reshape(-1), outs[1], outs[2:]
    tensor_gt = numpy.array([0] + [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], dtype='float32')
    assert len(tensor_res) == len(tensor_gt)
    assert len(tensor_res_out_idx) == 10
    for i in range(len(tensor_res)):
        assert tensor_res[i] == tensor_gt[i]
    for i in range(len(tensor_res_out_idx)):
        assert tensor_res_out_idx[i] == (2 if i == 0 else 1)
    assert len(grads) == 10
    assert grads[0].reshape(-1)[0] == random_grad[0]
    assert grads[0].reshape(-1)[1] == random_grad[1]
    assert grads[1].reshape(-1)[0] == random_grad[2]


def test_cpu():   # TestLoDTensorArrayStack: stack mode along axis 1
    attrs = {"axis": 1, "use_stack": True}
    rng = numpy.random.RandomState(0)
    inputs = [rng.rand(2, 3, 4).astype("float32") for _ in range(3)]
    outputs = [numpy.stack(inputs, axis=attrs["axis"]),
               numpy.array([x.shape[attrs["axis"]] for x in inputs], dtype="int32")]

    def build():
        array = layers.create_array(dtype='float32')
        idx = layers.fill_constant(shape=[1], dtype="int64", value=0)
        xs = []
        for i, x in enumerate(inputs):
            xs.append(layers.assign(x))
            xs[-1].stop_gradient = False
            layers.array_write(xs[-1], idx + i, array)
        output, output_index = layers.tensor_array_to_tensor(input=array, **attrs)
        loss = layers.reduce_sum(output)
        fluid.backward.append_backward(loss)
        return [output, output_index, *fluid.gradients(loss, xs)]
    outs = compile_fetches(build)()
    for got, want in zip(outs[:2], outputs):
        assert numpy.allclose(got, want, atol=0)
    for got, x in zip(outs[2:], inputs):   # input_grads: ones
        assert numpy.allclose(got, numpy.ones_like(x), atol=0)


def test_case():   # TestTensorArrayToTensorAPI: stack and concat along axis 1
    rng = numpy.random.RandomState(0)
    inp0 = rng.rand(2, 3, 4).astype("float32")
    inp1 = rng.rand(2, 3, 4).astype("float32")

    def build():
        x0 = fluid.layers.assign(inp0)
        x0.stop_gradient = False
        x1 = fluid.layers.assign(inp1)
        x1.stop_gradient = False
        i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        array = fluid.layers.create_array(dtype='float32')
        fluid.layers.array_write(x0, i, array)
        fluid.layers.array_write(x1, i + 1, array)
        output_stack, output_index_stack = fluid.layers.tensor_array_to_tensor(
            input=array, axis=1, use_stack=True)
        output_concat, output_index_concat = fluid.layers.tensor_array_to_tensor(
            input=array, axis=1, use_stack=False)
        return output_stack, output_index_stack, output_concat, output_index_concat
    outs = compile_fetches(build)()
    want = [numpy.stack([inp0, inp1], axis=1), numpy.array([3, 3], "int32"),
            numpy.concatenate([inp0, inp1], axis=1), numpy.array([3, 3], "int32")]
    for s, d in zip(outs, want):   # Paddle checks static against dygraph: equal arrays
        assert numpy.array_equal(s, d)


def test_while_loop_case():
    inp0 = numpy.random.RandomState(0).rand(2, 3, 4).astype("float32")

    def build():
        zero = fluid.layers.fill_constant(shape=[1], dtype='int64', value=0)
        i = fluid.layers.fill_constant(shape=[1], dtype='int64', value=1)
        ten = fluid.layers.fill_constant(shape=[1], dtype='int64', value=10)
        array = fluid.layers.create_array(dtype='float32')
        x0 = fluid.layers.assign(inp0)
        fluid.layers.array_write(x0, zero, array)

        def body(i, end, array):
            prev = fluid.layers.array_read(array, i - 1)
            fluid.layers.array_write(prev, i, array)
            return i + 1, end, array
        _, _, array = fluid.layers.while_loop(lambda i, end, array: fluid.layers.less_than(
            i, end), body, [i, ten, array])
        last = fluid.layers.fill_constant(shape=[1], dtype='int64', value=9)
        return [fluid.layers.array_length(array), fluid.layers.array_read(array, last)]
    length, last = compile_fetches(build)()
    assert length[0] == 10
    assert numpy.array_equal(last, inp0)
