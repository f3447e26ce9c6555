"""The indexing layers (topk, gather, gather_nd, index_select, index_sample, where,
nonzero, ...) traced into compiled methods, the results whose size depends on values
followed by other ops and differentiated through, and the errors each layer reports."""
import numpy as np
import pytest

import fluid

L = fluid.layers


def compile_one(body, feeds, seed=0):
    """A compiled program whose method ``f`` declares the data vars ``feeds`` (name ->
    (shape, dtype, stop_gradient); -1 for dims known when it runs) and returns
    body(*vars)."""
    class P(fluid.Program):
        @fluid.network(*feeds)
        def f(self, *args):
            xs = [L.data(n, shape=list(s), dtype=d, stop_gradient=sg, append_batch_size=False)
                  for n, (s, d, sg) in feeds.items()]
            return body(*xs)
    return P().Compile(seed=seed)


def test_topk_values_and_indices():
    p = compile_one(lambda x: L.topk(x, k=2), {"x": ([-1, 5], "float32", True)})
    x = np.array([[5, 4, 2, 3, 1], [9, 7, 10, 25, 0]], "float32")
    values, indices = p.f(x)
    np.testing.assert_array_equal(values, [[5, 4], [25, 10]])
    np.testing.assert_array_equal(indices, [[0, 1], [3, 2]])
    assert indices.dtype == np.int64


def test_topk_with_k_from_a_tensor():
    def body(x, k):
        values, indices = L.topk(x, k=k)
        assert values.shape == (-1, -1)
        return values, indices
    p = compile_one(body, {"x": ([-1, 6], "float32", True), "k": ([1], "int32", True)})
    x = np.random.default_rng(0).standard_normal((3, 6)).astype("float32")
    for k in (1, 4):
        values, _ = p.f(x, np.array([k], "int32"))
        np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :k])


def test_topk_outputs_stop_the_gradient_unless_asked():
    """As in Paddle, topk's results carry no gradient; with stop_gradient=False the
    gradient reaches the selected entries."""
    def body(x, pass_gradient):
        values, _ = L.topk(x, k=2)
        assert values.stop_gradient
        if not pass_gradient:
            return values
        values.stop_gradient = False
        return fluid.gradients(L.reduce_sum(values * values), [x])[0]
    p = compile_one(lambda x: body(x, True), {"x": ([-1, 4], "float64", False)})
    x = np.array([[1.0, 4.0, 3.0, 2.0]])
    np.testing.assert_array_equal(p.f(x), [[0, 8, 6, 0]])
    compile_one(lambda x: body(x, False), {"x": ([-1, 4], "float64", False)})


def test_gather_rows_and_its_gradient_modes():
    def body(x, idx):
        rows = L.gather(x, idx)
        kept = fluid.gradients(L.reduce_sum(rows), [x])[0]
        summed = fluid.gradients(L.reduce_sum(L.gather(x, idx, overwrite=False)), [x])[0]
        return rows, kept, summed
    p = compile_one(body, {"x": ([4, 2], "float64", False), "idx": ([-1, 1], "int64", True)})
    x = np.arange(8.0).reshape(4, 2)
    rows, kept, summed = p.f(x, np.array([[1], [1], [3]]))
    np.testing.assert_array_equal(rows, x[[1, 1, 3]])
    np.testing.assert_array_equal(kept[:, 0], [0, 1, 0, 1])
    np.testing.assert_array_equal(summed[:, 0], [0, 2, 0, 1])


def test_index_select_and_index_sample():
    def body(x, idx, cols):
        return L.index_select(x, L.reshape(idx, [-1]), dim=1), L.index_sample(x, cols)
    p = compile_one(body, {"x": ([-1, 4], "float32", True), "idx": ([-1, 1], "int32", True),
                           "cols": ([-1, 2], "int64", True)})
    x = np.arange(12, dtype="float32").reshape(3, 4)
    idx = np.array([[3], [0], [3]], "int32")
    cols = np.array([[0, 1], [3, 3], [2, 0]], "int64")
    selected, sampled = p.f(x, idx, cols)
    np.testing.assert_array_equal(selected, x[:, [3, 0, 3]])
    np.testing.assert_array_equal(sampled, np.take_along_axis(x, cols, 1))


def test_where_and_nonzero_give_coordinates():
    def body(x):
        return L.where(x > 0), L.nonzero(x), L.concat(list(L.nonzero(x, as_tuple=True)), 1)
    p = compile_one(body, {"x": ([-1, 2], "float32", True)})
    x = np.array([[1, 0], [0, 2]], "float32")
    for got in p.f(x):
        np.testing.assert_array_equal(got, [[0, 0], [1, 1]])
    one = compile_one(lambda v: L.nonzero(v, as_tuple=True), {"v": ([-1, 3], "float32", True)})
    assert isinstance(one.f(np.array([[1, 1, 0]], "float32")), tuple)


def test_a_result_sized_by_values_flows_into_later_ops_and_gradients():
    """where's row count changes from call to call: gather_nd, an elementwise chain, a
    reduction and the gradients after it are sized when they run."""
    def body(x):
        picked = L.gather_nd(x, L.where(x > 0))
        assert picked.shape == (-1,)
        h = L.exp(L.scale(L.tanh(picked * 2.0), 3.0, 1.0))
        loss = L.reduce_sum(h)
        return h, loss, fluid.gradients(loss, [x])[0]
    p = compile_one(body, {"x": ([-1, 5], "float64", False)})
    for seed, batch in ((0, 3), (1, 3), (2, 40)):
        x = np.random.default_rng(seed).standard_normal((batch, 5))
        h, loss, grad = p.f(x)
        m = x > 0
        t = np.tanh(2 * x[m])
        np.testing.assert_allclose(h, np.exp(3 * t + 1))
        want = np.zeros_like(x)
        want[m] = np.exp(3 * t + 1) * 3 * (1 - t * t) * 2
        np.testing.assert_allclose(grad, want)
    h, loss, grad = p.f(-np.ones((2, 5)))      # nothing selected
    assert h.shape == (0,) and loss == 0 and not grad.any()


def test_training_through_a_selection_sized_by_values():
    """An embedding table trained through rows picked by where: the update matches the
    same program picking the rows with a fixed slice."""
    def build(dynamic):
        def body(x, ids):
            w = L.create_parameter([10, 4], "float32", name="w")
            bs = [L.create_parameter([4], "float32", name=f"b{i}") for i in range(3)]
            sel = L.gather_nd(ids, L.where(ids > 2)) if dynamic else \
                L.slice(ids, [0], [1], [3])
            h = L.reduce_sum(L.gather(w, sel), dim=[0])
            for b in bs:
                h = h * b + b
            loss = L.reduce_mean(L.reduce_sum(x * h, dim=[1]))
            fluid.optimizer.Adam(learning_rate=0.1).minimize(loss)
            return loss

        class P(fluid.Program):
            @fluid.network("x", "ids")
            def train(self, x, ids):
                x = L.data("x", shape=[4], dtype="float32")
                ids = L.data("ids", shape=[3], dtype="int64", append_batch_size=False)
                return body(x, ids)
        return P().Compile(seed=0)
    a, b = build(True), build(False)
    x, ids = np.ones((2, 4), "float32"), np.array([1, 5, 7])
    for _ in range(3):
        assert a.train(x, ids) == b.train(x, ids)
    np.testing.assert_array_equal(a.get_var("w"), b.get_var("w"))


def test_gather_tree_traces_beams_back():
    p = compile_one(L.gather_tree, {"ids": ([3, 1, 2], "int64", True),
                                    "parents": ([3, 1, 2], "int64", True)})
    ids = np.array([[[2, 3]], [[4, 5]], [[6, 7]]])
    parents = np.array([[[0, 0]], [[1, 1]], [[1, 0]]])
    np.testing.assert_array_equal(p.f(ids, parents)[:, 0], [[3, 3], [5, 4], [6, 7]])


def test_scatter_layers():
    def body(x, ids, updates):
        replaced = L.scatter(x, ids, updates)
        added = L.scatter(x, ids, updates, overwrite=False)
        index = L.unsqueeze(ids, [1])
        nd = L.scatter_nd_add(x, index, updates)
        fresh = L.scatter_nd(index, updates, [5, 2])
        return replaced, added, nd, fresh
    p = compile_one(body, {"x": ([5, 2], "float32", True), "ids": ([-1], "int64", True),
                           "updates": ([-1, 2], "float32", True)})
    x = np.ones((5, 2), "float32")
    ids = np.array([4, 0, 4])
    updates = np.arange(6, dtype="float32").reshape(3, 2)
    replaced, added, nd, fresh = p.f(x, ids, updates)
    np.testing.assert_array_equal(replaced[[0, 4]], [[2, 3], [4, 5]])
    np.testing.assert_array_equal(added[[0, 4]], [[2, 3], [4, 6]])
    np.testing.assert_array_equal(nd[[0, 4]], [[3, 4], [5, 7]])
    np.testing.assert_array_equal(fresh[[0, 1, 4]], [[2, 3], [0, 0], [4, 6]])


def test_unique_feeds_a_lookup_trained_end_to_end():
    """The distinct ids of a batch (their number known only when the method runs) pick
    rows of a table, and a gather by the inverse index spreads them back: the table's
    gradient is the sum over each id's occurrences, as a direct lookup's."""
    def body(ids):
        table = L.create_parameter([6, 3], "float64", name="table")
        out, index, count = L.unique_with_counts(ids, dtype="int64")
        rows = L.gather(table, out)
        spread = L.gather(rows, index, overwrite=False)
        loss = L.reduce_sum(spread * spread)
        return out, count, spread, fluid.gradients(loss, [table])[0], \
            fluid.gradients(L.reduce_sum(L.gather(table, ids, overwrite=False) ** 2),
                            [table])[0]
    p = compile_one(body, {"ids": ([-1], "int64", True)})
    for ids in (np.array([3, 1, 3, 3, 5]), np.array([0, 0]), np.arange(6)):
        out, count, spread, grad, direct = p.f(ids)
        table = p.get_var("table")
        np.testing.assert_array_equal(out, list(dict.fromkeys(ids.tolist())))
        np.testing.assert_array_equal(count, [np.sum(ids == v) for v in out])
        np.testing.assert_array_equal(spread, table[ids])
        np.testing.assert_allclose(grad, direct)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: L.topk(x, k=0), fluid.OpArgumentError, "topk: k=0 must be at least 1"),
    (lambda x: L.topk(x, k=2.5), fluid.OpArgumentError, "topk: k must be an int"),
    (lambda x: L.topk(x, k=9), fluid.ShapeError, r"k=9 is larger than the last dim"),
    (lambda x: L.topk(np.ones(3), k=1), TypeError, "topk: input must be a fluid Variable"),
    (lambda x: L.gather(x, [1, 2]), TypeError, "gather: index must be a fluid Variable"),
    (lambda x: L.gather(x, x), TypeError, "gather: Index must be int32 or int64"),
    (lambda x: L.gather(x, L.cast(x, "int64"), overwrite=1), fluid.OpArgumentError,
     "overwrite must be True or False"),
    (lambda x: L.where([10]), TypeError, "where: condition must be a fluid Variable"),
    (lambda x: L.unique([10]), TypeError, "unique: x must be a fluid Variable"),
    (lambda x: L.unique(x), fluid.ShapeError, r"unique: X must be 1-D, got \[\?, 4\]"),
    (lambda x: L.unique_with_counts(L.reshape(x, [-1]), dtype="float32"), TypeError,
     "must be int32 or int64, got float32"),
    (lambda x: L.scatter_nd_add(x, L.cast(x, "int64"), L.cast(x, "float64")),
     fluid.OpArgumentError, "ref and updates must have the same dtype, got float32 and "
                            "float64"),
    (lambda x: L.scatter_nd(L.cast(x, "int64"), x, [4, -1.5]), fluid.OpArgumentError,
     "scatter_nd: shape must be a list of ints"),
    (lambda x: L.scatter(x, L.cast(x, "int64"), x), fluid.ShapeError,
     r"scatter: Ids must be a vector \[N\] or a column \[N, 1\]"),
    (lambda x: L.gather_tree(np.zeros((5, 2, 2), "int64"), x), TypeError,
     "gather_tree: ids must be a fluid Variable"),
    (lambda x: L.gather_tree(L.reshape(x, [-1, 2, 2]), L.reshape(x, [-1, 2, 2])), TypeError,
     "gather_tree: Ids must be int32 or int64, got float32"),
    (lambda x: L.nonzero(x, as_tuple="yes"), fluid.OpArgumentError,
     "as_tuple must be True or False"),
    (lambda x: L.index_select(x, L.cast(x, "int64"), dim=1.0), fluid.OpArgumentError,
     "index_select: dim must be an int"),
    (lambda x: L.index_select(x, L.cast(L.reshape(x, [-1]), "int64"), dim=3),
     fluid.ShapeError, "index_select dim 3 is out of range"),
    (lambda x: L.index_sample(x, L.cast(x, "int64")[:, :, None]), fluid.ShapeError,
     r"index_sample: X and Index must both be 2-D"),
    (lambda x: L.gather_nd(x, L.cast(L.concat([x, x], 1), "int64")), fluid.ShapeError,
     r"gather_nd: Index \[\?, 8\] addresses 8 dims, but X \[\?, 4\] has only 2"),
])
def test_layer_errors_name_the_problem_and_the_line(call, error, match):
    with pytest.raises(error, match=match) as info:
        compile_one(call, {"x": ([-1, 4], "float32", True)})
    assert "test_index_layers.py" in str(info.value)
