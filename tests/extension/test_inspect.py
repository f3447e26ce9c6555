"""``%fluid summary`` and ``%fluid inspect``: the model's layers, and what a watched call
kept, layer by layer (activations, dead units, gradient norms)."""
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
