"""The variable explorer: pick a program and a var, see statistics and a histogram."""
import numpy as np
import pytest

import fluid
from fluid.var_stats import histogram_svg, var_stats, vars_table
from fluid.widgets import explore, stats_html


class Net(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        with fluid.var_scope("enc"):
            h = fluid.layers.fc(input=x, size=8, act="relu")
        return fluid.layers.fc(input=h, size=2)


@pytest.fixture
def net():
    return Net().Compile(seed=0)


def test_var_stats(net):
    w = net.get_var("enc/fc_0.w_0")
    s = var_stats(net, "enc/fc_0.w_0", keep_values=True)
    assert (s.kind, s.shape, s.dtype, s.nbytes, s.device) == ("param", (4, 8), "float32", 128,
                                                              "cpu")
    assert s.min == pytest.approx(float(w.min())) and s.max == pytest.approx(float(w.max()))
    assert s.mean == pytest.approx(float(w.mean()), abs=1e-7)
    assert s.values.size == 32 and s.nonfinite == 0
    with pytest.raises(KeyError, match="not a persistable var"):
        var_stats(net, "nope")


def test_non_finite_values_are_counted(net):
    w = net.get_var("fc_0.w_0")
    w[0, 0], w[1, 1] = np.nan, np.inf
    net.set_var("fc_0.w_0", w)
    s = var_stats(net, "fc_0.w_0")
    assert s.nonfinite == 2 and np.isfinite(s.max)
    assert "non-finite" in stats_html(net, "fc_0.w_0")


def test_histogram_svg():
    svg = histogram_svg(np.arange(100.0), bins=10)
    assert svg.count('class="bar"') == 10
    assert "no values" in histogram_svg(np.array([]))
    assert histogram_svg(np.ones(5)).count('class="bar"') == 1


def test_explorer_widget(net):
    pytest.importorskip("ipywidgets")
    from fluid.widgets import Explorer
    other = Net().Compile(seed=1)
    ex = Explorer([("net", net), ("other", other)])
    assert ex.program is net
    assert list(ex.var_picker.options)[:2] == ["enc/fc_0.w_0", "enc/fc_0.b_0"]  # params first
    assert "enc/fc_0.w_0" in ex.pane.value and "<svg" in ex.pane.value
    ex.select("fc_0.b_0")
    assert "<b>fc_0.b_0</b>" in ex.pane.value
    net.set_var("fc_0.b_0", np.array([5.0, 7.0], "float32"))
    ex.refresh_button.click()
    assert ">7<" in ex.pane.value and ">5<" in ex.pane.value      # max and min
    ex.program_picker.value = "other"
    assert ex.program is other and ex.var_picker.value == "enc/fc_0.w_0"
    with pytest.raises(KeyError):
        ex.select("missing")
    assert "fluid-explorer" in ex.widget._dom_classes


def test_explore_outside_a_kernel_is_a_static_table(net):
    shown = explore(net, var="fc_0.w_0")
    assert repr(shown) == repr(vars_table(net, title=net.program.name))
    html = shown._repr_html_()
    assert "<table" in html and "<svg" in html
    with pytest.raises(TypeError, match="compiled program"):
        explore(42)
