"""Display of programs: an SVG graph when graphviz's dot exists, the canonical text form as
text/plain, and a one-line hint instead of the graph when dot is missing."""
import shutil

import pytest

pytest.importorskip("IPython")

import fluid  # noqa: E402
from fluid import display  # noqa: E402
from fluid_interactive.ir import format_program  # noqa: E402
from tests.extension.helpers import NET_CELL, run  # noqa: E402

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz dot not installed")


@pytest.fixture
def net(ip):
    run(ip, NET_CELL)
    run(ip, "net = Net().Compile(seed=0)")
    return ip.user_ns["net"]


def bundle(ip, obj):
    data, _ = ip.display_formatter.format(obj)
    return data


@needs_dot
def test_program_method_and_desc_show_as_svg(ip, net):
    for obj in (net, net.train_step, net.program):
        data = bundle(ip, obj)
        assert data["image/svg+xml"].lstrip().startswith("<svg"), type(obj)
        assert "<?xml" not in data["image/svg+xml"]
    assert "train_step" in bundle(ip, net.train_step)["image/svg+xml"]


def test_text_plain_is_the_canonical_text(ip, net, monkeypatch):
    monkeypatch.setattr(display, "has_dot", lambda: True)
    assert bundle(ip, net.train_step)["text/plain"] == net.train_step.text.rstrip("\n")
    assert bundle(ip, net.program)["text/plain"] == format_program(net.program).rstrip("\n")
    text = bundle(ip, net)["text/plain"]
    assert text.splitlines()[0] == repr(net)
    assert format_program(net.program).rstrip("\n") in text


def test_without_dot_text_and_a_hint(ip, net, monkeypatch):
    monkeypatch.setattr(display, "has_dot", lambda: False)
    monkeypatch.setattr(display, "dot_to_svg", lambda dot, timeout=None: None)
    display._SVG_CACHE.clear()
    data = bundle(ip, net.infer)
    assert "image/svg+xml" not in data
    lines = data["text/plain"].splitlines()
    assert lines[-1] == display.NO_DOT_HINT
    assert "\n".join(lines[:-1]) == net.infer.text.rstrip("\n")
    g = fluid.graph(net)
    assert g._repr_mimebundle_()["text/plain"].endswith(display.NO_DOT_HINT)
    display._SVG_CACHE.clear()


def test_without_the_extension_nothing_is_registered(shell):
    from fluid_interactive.runtime.compiled import CompiledProgram
    assert CompiledProgram not in shell.display_formatter.formatters["image/svg+xml"].type_printers


def test_graph_options(ip, net, tmp_path):
    full = fluid.graph(net)
    fwd = fluid.graph(net, forward_only=True)
    collapsed = fluid.graph(net, collapse_grads=True)
    assert "sgd" in full.dot and "sgd" not in fwd.dot
    assert collapsed.dot != full.dot
    only_infer = fluid.graph(net, methods="infer")
    assert "train_step" not in only_infer.dot
    path = full.save(str(tmp_path / "net.dot"))
    with open(path) as fh:
        assert fh.read() == full.dot
    if shutil.which("dot"):
        with open(full.save(str(tmp_path / "net.svg"))) as fh:
            assert "</svg>" in fh.read()
    with pytest.raises(TypeError, match="draws a compiled program"):
        fluid.graph(42)


def test_big_programs_collapse_by_default(ip, net, monkeypatch):
    monkeypatch.setattr(display, "AUTO_COLLAPSE_OPS", 5)
    assert fluid.graph(net).dot == fluid.graph(net, collapse_grads=True).dot
    assert fluid.graph(net.infer).dot == fluid.graph(net.infer, collapse_grads=False).dot


def test_table_text_and_html():
    t = display.Table(["name", "n"], [["a<b", 1], ["c", 22]], title="T")
    text = repr(t).splitlines()
    assert text[0] == "T" and text[1].split() == ["name", "n"]
    assert text[3].endswith(" 1") and text[4].endswith("22")
    assert "a&lt;b" in t._repr_html_()
    assert "(none)" in repr(display.Table(["a"], []))


def test_graph_draws_a_transpile_plan():
    import fluid

    class Line(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[3], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=x, size=1), y))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss

    plan = fluid.transpile(Line().Compile(seed=0), main="train_step", trainers=2, pservers=2)
    g = fluid.graph(plan)
    assert "send" in g.dot and "recv" in g.dot and "cluster" in g.dot
    assert "send" in repr(g) or "send" in plan.text()
