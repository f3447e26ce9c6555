"""``%fluid summary`` and ``%fluid inspect``: the model's layers, and what a watched call
kept, layer by layer (activations, dead units, gradient norms)."""
import re

import numpy as np
import pytest

pytest.importorskip("IPython")

import fluid
from fluid.inspection import dead_fraction, inspect
from fluid_interactive.runtime.summary import Summary
from tests.extension.helpers import DATA_CELL, NET_CELL, run


@pytest.fixture
def net(ip):
    run(ip, NET_CELL)
    run(ip, DATA_CELL)
    run(ip, "net = Net().Compile(seed=0)")
    return ip.user_ns["net"]


def test_summary_magic(ip, net):
    s = run(ip, "%fluid summary net")
    assert isinstance(s, Summary) and s.methods == ["train_step", "infer"]
    assert s.total == 3 * 4 + 4 + 4 + 1
    assert run(ip, "%fluid summary net.infer").methods == ["infer"]
    data, _ = ip.display_formatter.format(s)
    assert "<table" in data["text/html"] and "net/" in data["text/plain"]
    with pytest.raises(Exception, match="compiled program or one of its methods"):
        run(ip, "%fluid summary X")


def test_inspect_before_anything_is_watched_says_how(ip, net):
    result = run(ip, "%fluid inspect net")
    assert "nothing watched yet" in repr(result) and "prog.watch('mlp')" in repr(result)
    assert "prog.watch" in result._repr_html_()


def test_inspect_shows_activations_dead_units_and_gradient_norms(ip, net):
    run(ip, "net.watch('net'); loss = net.train_step(X, Y)")
    result = run(ip, "%fluid inspect net")
    kept = net.watched
    layers = {lv.layer: lv for lv in result.layers}
    assert list(layers) == ["net/fc_0", "net/fc_1"]
    first = layers["net/fc_0"]
    assert first.activation == "net/fc_0.tmp_2"           # after the relu
    np.testing.assert_array_equal(first.values, kept["net/fc_0.tmp_2"])
    assert first.dead == dead_fraction(kept["net/fc_0.tmp_2"])
    norms = {g.param: g.norm for g in first.grads}
    assert set(norms) == {"net/fc_0.w_0", "net/fc_0.b_0"}
    assert norms["net/fc_0.w_0"] == pytest.approx(
        float(np.linalg.norm(kept["net/fc_0.w_0@GRAD"])))
    page = result._repr_html_()
    assert page.count('class="fluid-histogram"') == 2 + 4     # 2 activations, 4 gradients
    assert "dead units" in page and "net/fc_0.w_0@GRAD" in page
    assert "train_step(), call 1" in repr(result)
    assert inspect(net, "infer").title == "nothing watched yet"


def test_dead_fraction_counts_units_silent_for_the_whole_batch():
    a = np.array([[0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 3.0]])
    assert dead_fraction(a) == 0.5
    assert dead_fraction(np.zeros((3, 2, 2))) == 1.0
    assert dead_fraction(np.ones(4)) is None


def test_inspect_takes_a_compiled_program():
    with pytest.raises(TypeError, match="compiled program"):
        fluid.inspect("net")


# --- a var inside a loop: one value per iteration --------------------------------------------

@pytest.fixture
def loop(ip):
    """DESIGN §1's While, trained, its body under var_scope 'cell', watched."""
    run(ip, "from tests.runtime.test_loops import TrainedRecurrence\n"
            "loop = TrainedRecurrence().Compile(seed=0)\nloop.watch('cell')")
    return ip.user_ns["loop"]


def test_inspect_shows_a_var_inside_a_loop_per_iteration(ip, loop, rng):
    x, y = rng.standard_normal((5, 4)).astype(np.float32), np.zeros((5, 4), np.float32)
    loop.train_step(x, np.array([3]), y)
    result = run(ip, "%fluid inspect loop")
    kept = loop.watched
    tanh = {lv.layer: lv for lv in result.layers}["cell/tanh_0"]
    assert tanh.loop == "while_1" and tanh.per_iteration
    values = kept["cell/tanh_0.tmp_0"]
    assert values.shape == (3, 5, 4)                          # iterations, batch, units
    np.testing.assert_array_equal(tanh.values, values)
    np.testing.assert_array_equal(tanh.grad_values, kept["cell/tanh_0.tmp_0@GRAD"])
    assert tanh.shape() == "3 × [5, 4]"
    assert tanh.dead == dead_fraction(values.reshape(15, 4))   # silent in every iteration
    text = repr(result)
    assert "cell/tanh_0, in while_1" in text and "3 × [5, 4]" in text
    assert "one value per iteration, stacked along the first dim" in text
    per = result.iteration_table()
    rows = [r for r in per.rows if r[0] == "cell/tanh_0.tmp_0"]
    assert [r[1] for r in rows] == ["0", "1", "2"]
    for t, row in enumerate(rows):
        assert float(row[2]) == pytest.approx(float(values[t].mean()), rel=1e-3, abs=1e-6)
        assert float(row[4]) == pytest.approx(float(np.linalg.norm(values[t])), rel=1e-3)
        grad = kept["cell/tanh_0.tmp_0@GRAD"][t]
        assert float(row[5]) == pytest.approx(float(np.linalg.norm(grad)), rel=1e-3)
    page = result._repr_html_()
    assert "one value per iteration of <b>while_1</b>: the first dim (3) is the iteration" \
        in page
    assert page.count('class="fluid-iteration"') == 3 * 3        # 3 layers x 3 iterations
    assert page.count('class="fluid-iteration-chart"') == 3 + 3  # mean; gradient norm
    assert page.count("every iteration (3)") == 3
    assert "cell/tanh_0.tmp_0@GRAD: norm per iteration" in page


def test_a_loop_that_ran_no_iteration_inspects_as_empty(ip, loop, rng):
    x = rng.standard_normal((2, 4)).astype(np.float32)
    loop.train_step(x, np.array([0]), x)
    result = run(ip, "%fluid inspect loop.train_step")
    tanh = {lv.layer: lv for lv in result.layers}["cell/tanh_0"]
    assert tanh.values.shape[0] == 0
    assert tanh.shape() == "0 iterations" and tanh.stats() == "-"
    page = result._repr_html_()
    assert "no iterations" in page and "every iteration (0)" in page
    assert "0 iterations" in repr(result)


def test_iteration_statistics_and_samples():
    from fluid.iterations import chart_svg, iteration_stats, sample
    values = np.arange(24.0).reshape(3, 2, 4)
    st = iteration_stats(values)
    np.testing.assert_allclose(st.mean, [3.5, 11.5, 19.5])
    np.testing.assert_allclose(st.norm, [np.linalg.norm(values[t]) for t in range(3)])
    assert st.count == 3
    assert sample(3) == [0, 1, 2] and sample(100, 5) == [0, 25, 50, 74, 99]
    svg = chart_svg([("mean", st.mean, "#000")], band=(st.min, st.max))
    assert svg.count("<polyline") == 1 and svg.count("<polygon") == 1
    # the scale runs from the band's lowest to its highest value, over iterations 0..2
    labels = re.findall(r">([^<>]+)</text>", svg)
    assert labels == ["23", "0", "0", "2", "iteration"]
    assert "no iterations" in chart_svg([("mean", np.array([]), "#000")])


def test_inspect_shows_a_sparse_gradient_as_its_rows():
    class Tagger(fluid.Program):
        @fluid.network("ids", "y")
        def train_step(self, ids, y):
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            e = fluid.layers.embedding(ids, size=[50, 4], is_sparse=True)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(e, size=1), y))
            fluid.optimizer.SGD(0.1).minimize(loss)
            return loss
    prog = Tagger().Compile(seed=0)
    prog.watch("*")
    prog.train_step(np.array([[3], [8], [3]], np.int64), np.ones((3, 1), np.float32))
    result = inspect(prog)
    grads = {g.param: g for lv in result.layers for g in lv.grads}
    table = grads["embedding_0.w_0"]
    assert table.rows == "SelectedRows, 2 of 50 rows" and table.values.shape == (2, 4)
    assert "SelectedRows, 2 of 50 rows" in str(result.table())
    assert "SelectedRows, 2 of 50 rows" in result._repr_html_()
