"""cvm and filter_by_instag: forwards against NumPy references written from Paddle 1.8's
test_cvm_op and test_filter_by_instag_op on their inputs (LoD rows as padded batches with
lengths), gradients against finite differences (cvm's show and click columns against
Paddle's rule, which is not the derivative), the layers in compiled programs, and their
errors. PyTorch has neither op."""
import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_block, check_grad, check_op, run_forward

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError
from fluid_interactive.ops.interpret import run_ops

L = fluid.layers

# --- cvm ----------------------------------------------------------------------------------


def ref_cvm(X, CVM, use_cvm, **_):
    """Paddle's cvm_compute, row by row."""
    rows = []
    for row in X.reshape(-1, X.shape[-1]):
        if use_cvm:
            y = row.copy()
            y[0] = np.log(row[0] + 1)
            y[1] = np.log(row[1] + 1) - y[0]
        else:
            y = row[2:]
        rows.append(y)
    return np.array(rows).reshape(X.shape[:-1] + (-1,))


def paddle_cvm_inputs(rng, batch):
    """test_cvm_op's inputs: uniform [batch, 11] rows, CVM (0.6, 0.4) for each row."""
    x = rng.uniform(0, 1, (batch, 11)).astype("float32")
    return {"X": x, "CVM": np.tile(np.array([[0.6, 0.4]], "float32"), (batch, 1))}


@pytest.mark.parametrize("use_cvm,batch", [(True, 2), (False, 2), (False, 1)])
def test_cvm_forward_on_paddles_inputs(rng, use_cvm, batch):
    check_op("cvm", paddle_cvm_inputs(rng, batch), {"use_cvm": use_cvm}, reference=ref_cvm,
             batch_unknown=batch > 1)


def _cvm_grad_check(inputs, attrs, rng):
    """X@GRAD: CVM in the show/click columns (Paddle's rule); the other columns against
    central finite differences of sum(Y * cotangent), in float64."""
    inputs = {k: (v.astype("float64") if v.dtype.kind == "f" else v) for k, v in inputs.items()}
    op, env = build_op("cvm", inputs, attrs)
    run_ops([op], env)
    cot = rng.standard_normal(env["out_Y_0"].shape)
    dx = analytic_grads(op, env, {"out_Y_0": cot}, ["X"])["X"][0]
    x = env["X_0"]
    cvm = inputs["CVM"]
    cvm = cvm if x.ndim == 2 else np.broadcast_to(cvm[:, None], x.shape[:2] + (2,))
    valid = np.ones(x.shape[:-1], bool)
    if "Lengths" in inputs:
        valid = np.arange(x.shape[1]) < inputs["Lengths"][:, None]
    np.testing.assert_array_equal(dx[..., :2], np.where(valid[..., None], cvm, 0))
    for i in np.ndindex(x.shape[:-1] + (x.shape[-1] - 2,)):
        at = i[:-1] + (i[-1] + 2,)
        values = []
        for sign in (1, -1):
            e = dict(env)
            e["X_0"] = x.copy()
            e["X_0"][at] += sign * 1e-6
            run_ops([op], e)
            values.append(float(np.sum(e["out_Y_0"] * cot)))
        assert dx[at] == pytest.approx((values[0] - values[1]) / 2e-6, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("use_cvm", [True, False])
def test_cvm_gradient_is_paddles(rng, use_cvm):
    _cvm_grad_check(paddle_cvm_inputs(rng, 2), {"use_cvm": use_cvm}, rng)


@pytest.mark.parametrize("use_cvm", [True, False])
def test_cvm_on_a_padded_batch_with_lengths(rng, use_cvm):
    x = rng.uniform(0, 1, (3, 4, 6))
    x[0, 2:] = -5.0        # padding: its log would be nan, and must reach nothing
    x[2, 1:] = -5.0
    inputs = {"X": x, "CVM": rng.uniform(0, 3, (3, 2)), "Lengths": np.array([2, 4, 1])}
    got = check_op("cvm", inputs, {"use_cvm": use_cvm}, reference=lambda X, Lengths, **a:
                   ref_cvm(np.where((np.arange(4) < Lengths[:, None])[..., None], X, 0), **a))
    assert not got["Y"][0][0, 2:].any()
    _cvm_grad_check(inputs, {"use_cvm": use_cvm}, rng)


def test_continuous_value_model_in_a_program(rng):
    x = rng.uniform(0, 2, (5, 7))
    show_click = rng.uniform(0, 3, (5, 2))
    cot = rng.standard_normal((5, 7))

    class Ctr(fluid.Program):
        @fluid.network("x", "sc", "cot")
        def f(self, x, sc, cot):
            x = L.data("x", [-1, 7], "float64", append_batch_size=False, stop_gradient=False)
            sc = L.data("sc", [-1, 2], "float64", append_batch_size=False)
            c = L.data("cot", [-1, 7], "float64", append_batch_size=False)
            y = L.continuous_value_model(x, sc, True)
            dx, = fluid.gradients(L.reduce_sum(y * c), [x])
            return y, L.continuous_value_model(x, sc, use_cvm=False), dx

    y, bare, dx = Ctr().Compile().f(x, show_click, cot)
    np.testing.assert_allclose(y, ref_cvm(x, None, True), rtol=1e-12)
    np.testing.assert_array_equal(bare, x[:, 2:])
    np.testing.assert_array_equal(dx, np.concatenate([show_click, cot[:, 2:]], axis=1))


# --- filter_by_instag ----------------------------------------------------------------------


def ref_instag(Ins, Ins_tag, Filter_tag, is_lod, out_val_if_empty, InsLengths=None,
               InsTagLengths=None, **_):
    """Paddle's filter, instance by instance, on padded inputs."""
    b = len(Ins)
    tags = Ins_tag.reshape(b, -1)
    n_tags = tags.shape[1] if InsTagLengths is None else InsTagLengths
    rows = np.ones(b, np.int64) if not is_lod else (
        np.full(b, Ins.shape[1]) if InsLengths is None else InsLengths)
    out, index_map = [], []
    for i in range(b):
        if set(tags[i, :np.broadcast_to(n_tags, b)[i]]) & set(Filter_tag.reshape(-1)):
            kept = np.zeros_like(Ins[i])
            kept[:rows[i]] = Ins[i][:rows[i]]
            index_map.append([len(out), i, rows[i]])
            out.append(Ins[i] if not is_lod else kept)
    if not out:
        empty = np.zeros((1,) + Ins.shape[1:], Ins.dtype)
        (empty if not is_lod else empty[:, 0])[...] = out_val_if_empty
        return {"Out": empty, "LossWeight": np.zeros((1, 1)), "IndexMap": np.array([[0, 1, 1]]),
                "OutLengths": np.ones(1)}
    index_map = np.array(index_map)
    return {"Out": np.array(out), "LossWeight": np.ones((len(out), 1)), "IndexMap": index_map,
            "OutLengths": index_map[:, 2]}


WITH_LENGTHS = {"OutLengths": 1}


def paddle_case_1():
    """test_filter_by_instag_op's case 1: 36 rows (row i all i) in 8 instances of 1 .. 8
    rows, tags 1, 2, 1, 2, ...; keep tag 2. As a padded batch [8, 8, 4], padding 7.5."""
    lengths = np.arange(1, 9)
    flat = np.repeat(np.arange(36.0), 4).reshape(36, 4)
    ins = np.full((8, 8, 4), 7.5)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for i in range(8):
        ins[i, :lengths[i]] = flat[offsets[i]:offsets[i + 1]]
    return {"Ins": ins, "Ins_tag": np.array([[1], [2]] * 4, np.int64),
            "Filter_tag": np.array([2], np.int64), "InsLengths": lengths}


def test_filter_by_instag_paddle_case_1():
    inputs = paddle_case_1()
    attrs = {"is_lod": True, "out_val_if_empty": 0}
    got = check_op("filter_by_instag", inputs, attrs, reference=ref_instag,
                   output_counts=WITH_LENGTHS, batch_unknown=False)
    out, index_map = got["Out"][0], got["IndexMap"][0]
    # Paddle's LoD result: the kept rows one after another, and its map of row offsets
    rows = np.concatenate([o[:n] for o, n in zip(out, index_map[:, 2])])
    want = np.concatenate([np.arange(s, s + n) for s, n in zip([1, 6, 15, 28], [2, 4, 6, 8])])
    np.testing.assert_array_equal(rows, np.repeat(want, 4).reshape(-1, 4))
    paddle_map = [[0, 1, 2], [2, 6, 4], [6, 15, 6], [12, 28, 8]]
    offsets = np.concatenate([[0], np.cumsum(inputs["InsLengths"])])
    np.testing.assert_array_equal(np.stack([np.cumsum(index_map[:, 2]) - index_map[:, 2],
                                            offsets[index_map[:, 1]], index_map[:, 2]], 1),
                                  paddle_map)
    np.testing.assert_array_equal(got["LossWeight"][0], np.ones((4, 1)))
    assert got["LossWeight"][0].dtype == np.float32
    check_grad("filter_by_instag", inputs, attrs, wrt=["Ins"], through=["Out"])


@pytest.mark.parametrize("filter_tag,is_lod,dtype", [
    (1, True, "float64"), (3, True, "float64"), (3, False, "float64"), (1, False, "float32"),
    (3, False, "int64"), (3, False, "int32"),
], ids=["case2", "case3-empty", "case4-empty", "rows", "case6-int64", "case7-int32"])
def test_filter_by_instag_paddle_cases(rng, filter_tag, is_lod, dtype):
    """Paddle's cases 2 to 7: four instances of one row [4, 36], tags 2, 1, 2, 1."""
    x = rng.random((4, 36))
    x = (x * 10).astype(dtype) if dtype.startswith("int") else x.astype(dtype)
    inputs = {"Ins": x[:, None] if is_lod else x, "Ins_tag": np.array([[2], [1], [2], [1]]),
              "Filter_tag": np.array([filter_tag])}
    attrs = {"is_lod": is_lod, "out_val_if_empty": 0}
    got = check_op("filter_by_instag", inputs, attrs, reference=ref_instag, batch_unknown=False,
                   output_counts=WITH_LENGTHS)
    if filter_tag == 1:
        np.testing.assert_array_equal(got["IndexMap"][0], [[0, 1, 1], [1, 3, 1]])
    else:
        np.testing.assert_array_equal(got["LossWeight"][0], [[0]])
    if dtype.startswith("float"):
        check_grad("filter_by_instag", inputs, attrs, wrt=["Ins"], through=["Out"])


def test_filter_by_instag_tags_past_their_length_and_the_empty_fill(rng):
    tags = np.array([[4, 9, 9], [5, 6, 4], [9, 1, 1]])
    inputs = {"Ins": rng.random((3, 2, 5)), "Ins_tag": tags, "Filter_tag": np.array([4, 7]),
              "InsTagLengths": np.array([1, 2, 3])}
    got = check_op("filter_by_instag", inputs, {"is_lod": True, "out_val_if_empty": 0},
                   reference=ref_instag, batch_unknown=False,
                   output_counts=WITH_LENGTHS)
    np.testing.assert_array_equal(got["IndexMap"][0], [[0, 0, 2]])    # row 1's 4 is padding
    got = check_op("filter_by_instag", {"Ins": rng.random((3, 5)), "Ins_tag": tags,
                                        "Filter_tag": np.array([8])},
                   {"is_lod": False, "out_val_if_empty": -3}, reference=ref_instag,
                   batch_unknown=False, output_counts=WITH_LENGTHS)
    np.testing.assert_array_equal(got["Out"][0], np.full((1, 5), -3.0))
    got = run_forward("filter_by_instag", {"Ins": rng.random((3, 5)), "Ins_tag": tags,
                                           "Filter_tag": np.zeros(0, np.int64)},
                      {"is_lod": False})
    np.testing.assert_array_equal(got["LossWeight"][0], [[0]])     # no tag to keep


def test_filter_by_instag_in_a_program(rng):
    inputs = paddle_case_1()

    def build():
        ins = L.data("ins", [-1, 8, 4], "float64", append_batch_size=False, stop_gradient=False)
        tags = L.data("tags", [-1, 1], "int64", append_batch_size=False)
        lengths = L.data("lengths", [-1], "int64", append_batch_size=False)
        out, weight, out_lengths = L.filter_by_instag(ins, tags, [2], True,
                                                      ins_lengths=lengths)
        rows, _ = L.filter_by_instag(ins[:, 0], tags, [1], False)
        return [out * 2.0, L.cast(weight, "float64"), out_lengths, rows]
    out, weight, out_lengths, rows = check_block(
        build, {"ins": inputs["Ins"], "tags": inputs["Ins_tag"],
                "lengths": inputs["InsLengths"]}, wrt=["ins"])
    assert out.shape == (4, 8, 4)
    np.testing.assert_array_equal(weight, np.ones((4, 1)))
    np.testing.assert_array_equal(out_lengths, [2, 4, 6, 8])
    np.testing.assert_array_equal(rows, inputs["Ins"][0::2, 0])


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op,inputs,attrs,match", [
    ("cvm", {"X": np.zeros((2, 3), "int64"), "CVM": np.zeros((2, 2))}, {},
     r"X must be a float \[N, D\]"),
    ("cvm", {"X": np.zeros((2, 1)), "CVM": np.zeros((2, 2))}, {}, "at least 2 columns"),
    ("cvm", {"X": np.zeros((2, 4)), "CVM": np.zeros((2, 3))}, {},
     r"CVM must be float64\[N, 2\]"),
    ("cvm", {"X": np.zeros((2, 4)), "CVM": np.zeros((2, 2)), "Lengths": np.ones(2, "int64")},
     {}, "lengths go with a padded batch"),
    ("filter_by_instag", {"Ins": np.zeros((2, 3)), "Ins_tag": np.zeros((2, 1), "int64"),
                          "Filter_tag": np.zeros(1, "int64")}, {"is_lod": True},
     r"Ins must be a padded batch \[B, T, D\]"),
    ("filter_by_instag", {"Ins": np.zeros((2, 3)), "Ins_tag": np.zeros((3, 1), "int64"),
                          "Filter_tag": np.zeros(1, "int64")}, {"is_lod": False},
     r"Ins_tag must be int64 \[B\] or \[B, K\]"),
    ("filter_by_instag", {"Ins": np.zeros((2, 3)), "Ins_tag": np.zeros((2, 1), "int64"),
                          "Filter_tag": np.zeros(1)}, {"is_lod": False},
     "Filter_tag must be int64 tags"),
    ("filter_by_instag", {"Ins": np.zeros((2, 3)), "Ins_tag": np.zeros((2, 1), "int64"),
                          "Filter_tag": np.zeros(1, "int64"),
                          "InsLengths": np.ones(2, "int64")}, {"is_lod": False},
     "ins_lengths go with is_lod=True"),
])
def test_op_errors(op, inputs, attrs, match):
    with pytest.raises((ShapeError, fluid.DTypeError), match=match):
        run_forward(op, inputs, attrs)


def _trace(body):
    class P(fluid.Program):
        @fluid.network()
        def f(self):
            x2 = L.data("x2", [-1, 6], "float32", append_batch_size=False)
            x3 = L.data("x3", [-1, 3, 6], "float32", append_batch_size=False)
            tags = L.data("tags", [-1, 2], "int64", append_batch_size=False)
            return body(x2, x3, tags)
    return P().Compile()


@pytest.mark.parametrize("body,error,match", [
    (lambda x2, x3, t: L.continuous_value_model(L.reshape(x2, [-1]), x2), ShapeError,
     r"input .* must be \[N, D\]"),
    (lambda x2, x3, t: L.filter_by_instag(x2, t, [1], 1), OpArgumentError,
     "is_lod must be True or False"),
    (lambda x2, x3, t: L.filter_by_instag(x2, t, [1], True), ShapeError,
     r"must be a padded batch \[B, T, D\] with is_lod=True"),
    (lambda x2, x3, t: L.filter_by_instag(x3, t, [1], True, 0.5), OpArgumentError,
     "out_val_if_empty must be an int"),
    (lambda x2, x3, t: L.filter_by_instag(x3, t, [], True), OpArgumentError,
     "filter_tag must be an int64 Variable or a non-empty list of ints"),
])
def test_layer_errors(body, error, match):
    with pytest.raises(error, match=match):
        _trace(body)
