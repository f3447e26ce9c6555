"""Variables behave like arrays where users expect it: indexing and slicing, comparisons
(bool results, with numbers on either side), ``abs``, and gradients through them."""
import numpy as np
import pytest

import fluid


def compiled(body, shape=(3, 4)):
    """A program whose one method maps ``h`` (a batch of ``shape``) through ``body``."""
    class P(fluid.Program):
        @fluid.network("h")
        def f(self, h):
            h = fluid.layers.data(name="h", shape=list(shape), dtype="float32")
            return body(h)
    return P().Compile(seed=0)


H = np.random.default_rng(0).integers(-3, 4, (2, 3, 4)).astype("float32")


@pytest.mark.parametrize("index", [
    lambda h: h[:, 0], lambda h: h[:, -1], lambda h: h[:, 1:3], lambda h: h[..., 2],
    lambda h: h[:, :, -2:], lambda h: h[0], lambda h: h[-1, 1:], lambda h: h[None],
    lambda h: h[:, None, 2], lambda h: h[:, 1, 1:3], lambda h: h[:], lambda h: h[...],
    lambda h: h[:, 5:], lambda h: h[:, -10:2], lambda h: h[0, None], lambda h: h[1, :, None],
], ids=["[:,0]", "[:,-1]", "[:,1:3]", "[...,2]", "[:,:,-2:]", "[0]", "[-1,1:]", "[None]",
        "[:,None,2]", "[:,1,1:3]", "[:]", "[...]", "[:,5:]", "[:,-10:2]", "[0,None]",
        "[1,:,None]"])
def test_indexing_matches_numpy(index):
    got = compiled(index).f(H)
    np.testing.assert_array_equal(got, index(H))


STEPPED = {
    "[:,::2]": lambda h: h[:, ::2], "[...,1:-1:3]": lambda h: h[..., 1:-1:3],
    "[::-1]": lambda h: h[::-1], "[:,::-2,1]": lambda h: h[:, ::-2, 1],
    "[:,2:0:-1]": lambda h: h[:, 2:0:-1], "[1,-1::-3]": lambda h: h[1, -1::-3],
    "[:,:-4:-1,None]": lambda h: h[:, :-4:-1, None], "[:,5::-2]": lambda h: h[:, 5::-2],
    "[:,1:1:-1]": lambda h: h[:, 1:1:-1], "[:,::3,::-1]": lambda h: h[:, ::3, ::-1],
    "[1,None,::2]": lambda h: h[1, None, ::2], "[::2,0,None,::-1]": lambda h: h[::2, 0, None, ::-1],
}


@pytest.mark.parametrize("index", STEPPED.values(), ids=STEPPED.keys())
def test_stepped_slices_match_numpy_and_build_strided_slice(index):
    prog = compiled(index)
    np.testing.assert_array_equal(prog.f(H), index(H))
    assert "strided_slice" in {op.type for op in prog.program.block("f").ops}


@pytest.mark.parametrize("index", [STEPPED[k] for k in ("[:,::2]", "[::-1]", "[:,::-2,1]",
                                                        "[:,::3,::-1]", "[...,1:-1:3]")])
def test_gradients_through_stepped_slices(index):
    from ops.harness import check_block

    def build():
        x = fluid.layers.data("x", [2, 3, 4], "float64", append_batch_size=False,
                              stop_gradient=False)
        return index(x)
    out, = check_block(build, {"x": H.astype("float64")}, wrt=["x"])
    np.testing.assert_array_equal(out, index(H))


@pytest.mark.parametrize("compare", [
    lambda h: h > 0, lambda h: h >= 1, lambda h: h < -1, lambda h: h <= 0, lambda h: h == 2,
    lambda h: h != 2, lambda h: h > 0, lambda h: h > h[:, :, 0:1], lambda h: h == h,
])
def test_comparisons_are_bool_variables(compare):
    got = compiled(compare).f(H)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, compare(H))


def test_abs_and_a_mask_in_arithmetic():
    prog = compiled(lambda h: {"abs": abs(h),
                               "relu": h * fluid.layers.cast(h > 0, "float32")})
    out = prog.f(H)
    np.testing.assert_array_equal(out["abs"], np.abs(H))
    np.testing.assert_array_equal(out["relu"], np.maximum(H, 0))


def test_comparison_layers_take_numbers_and_variables():
    prog = compiled(lambda h: (fluid.layers.less_than(h, 1), fluid.layers.not_equal(h, h[:, 0:1])))
    a, b = prog.f(H)
    np.testing.assert_array_equal(a, H < 1)
    np.testing.assert_array_equal(b, H[:, 0:1] != H)
    with pytest.raises(fluid.OpArgumentError, match="cannot compare a Variable with str"):
        compiled(lambda h: h > "0")


def test_gradients_flow_through_slices_and_abs():
    class Net(fluid.Program):
        @fluid.network("x")
        def train_step(self, x):
            x = fluid.layers.data(name="x", shape=[3], dtype="float32")
            h = fluid.layers.fc(input=x, size=4, bias_attr=False)
            loss = fluid.layers.mean(abs(h[:, 1:3]))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss

    prog = Net().Compile(seed=0)
    w = prog.get_var("fc_0.w_0")
    x = np.random.default_rng(1).standard_normal((5, 3)).astype("float32")
    prog.watch("fc_0.w_0@GRAD")
    loss = prog.train_step(x)
    h = x @ w
    assert loss == pytest.approx(np.abs(h[:, 1:3]).mean(), rel=1e-5)
    dh = np.zeros_like(h)
    dh[:, 1:3] = np.sign(h[:, 1:3]) / h[:, 1:3].size
    np.testing.assert_allclose(prog.watched["fc_0.w_0@GRAD"], x.T @ dh, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("index, match", [
    (lambda h: h[:, ::0], "a slice step cannot be zero"),
    (lambda h: h[:, ::1.5], "slice bounds and steps must be integers"),
    (lambda h: h[0, 0, 0, 0], r"too many indices \(4\) for a Variable of rank 3"),
    (lambda h: h[:, 3], "index 3 is out of range for dim 1 of size 3"),
    (lambda h: h[..., ...], r"only one '\.\.\.'"),
    (lambda h: h[h > 0], "indexing with a Variable"),
    (lambda h: h["a"], "cannot index with str"),
    (lambda h: h[:, 0.5:], "slice bounds and steps must be integers"),
])
def test_unsupported_indices_are_clear_errors(index, match):
    with pytest.raises(fluid.OpArgumentError, match=match):
        compiled(index)


def test_a_variable_is_not_iterable():
    with pytest.raises(fluid.ProgramDefinitionError, match="cannot be iterated"):
        compiled(lambda h: list(h))
