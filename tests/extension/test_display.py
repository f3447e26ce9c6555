"""Display of programs: an SVG graph when graphviz's dot exists, the canonical text form as
text/plain, and a one-line hint instead of the graph when dot is missing."""
import html
import os
import re
import shutil

import pytest

pytest.importorskip("IPython")

import fluid
from fluid import display
from fluid_interactive.ir import format_program
from tests.extension.helpers import NET_CELL, run

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
def test_program_method_and_desc_show_as_a_fitted_drawing(ip, net):
    for obj in (net, net.train_step, net.program):
        data = bundle(ip, obj)
        assert data["image/svg+xml"].lstrip().startswith("<svg"), type(obj)
        assert "<?xml" not in data["image/svg+xml"]
        page = data["text/html"]
        assert 'class="fluid-graph"' in page and "max-width:100%" in page
        assert '<span class="fluid-graph-controls" hidden>' in page   # shown by the script
        assert page.count("<svg") >= 1 and "<script>" in page
    assert "train_step" in bundle(ip, net.train_step)["image/svg+xml"]


@needs_dot
def test_graph_shows_its_title_and_the_layers_op_by_op(net):
    g = fluid.Graph(fluid.graph(net.train_step).dot, "my <title>", "text form")
    page = g._repr_html_()
    assert '<span class="fluid-graph-title" style="font-weight:bold">my &lt;title&gt;</span>' \
        in page
    page = fluid.graph(net.train_step)._repr_html_()
    layers = re.findall(r'<details class="fluid-graph-layer" data-node="([^"]+)"', page)
    assert layers and "<summary>the layers op by op" in page
    titles = set(re.findall(r"<title>([^<]*)</title>", page))
    assert set(layers) <= titles          # each expansion belongs to a box of the drawing
    assert page.count("<svg") == 1 + len(layers)


@needs_dot
def test_a_loop_opens_into_its_body_and_its_inner_loop_into_its_own():
    """Every box the cell's drawing or an opened body holds has its drawing under it, and
    the script opens one whichever drawing was clicked."""
    from tests.render.loops import NestedLoops
    page = fluid.graph(NestedLoops().Compile(seed=0).train_step)._repr_html_()
    assert "<summary>the layers op by op and the bodies of loops and branches (" in page
    opened = re.findall(r'<details class="fluid-graph-layer" data-node="([^"]+)" '
                        r'style="[^"]*"><summary>([^<]*)</summary>', page)
    labels = dict(opened)
    assert labels["sb2"] == "while_0 (while): body"
    assert labels["sb3"] == "while_0 (while): body › while_1 (while): body"
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    main, bodies = svgs[0], dict(zip([n for n, _ in opened], svgs[1:]))
    assert "<title>sb2</title>" in main and "<title>sb3</title>" not in main
    assert "<title>sb3</title>" in bodies["sb2"]          # the inner loop's box, one level in
    assert 'root.querySelectorAll("svg g.node")' in page   # every drawing's boxes open
    assert 'root.addEventListener("click"' in page


@needs_dot
def test_a_drawing_too_wide_side_by_side_stacks_its_methods(net, monkeypatch):
    g = fluid.graph(net)
    side = g.dot
    assert g.narrow is not None and g.narrow != side
    monkeypatch.setattr(display, "WIDTH_BUDGET_PX", 10)
    display._SVG_CACHE.clear()
    _ = g.svg
    assert g.dot != side and g.narrow is None          # it now draws the stacked layout
    assert fluid.graph(net, stack=False).narrow is None


def _fake_dot(tmp_path, monkeypatch, script):
    exe = tmp_path / "dot"
    exe.write_text("#!/bin/sh\n" + script + "\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    display._SVG_CACHE.clear()


def test_a_crashing_graphviz_is_explained_in_the_cell(net, tmp_path, monkeypatch):
    _fake_dot(tmp_path, monkeypatch, "kill -SEGV $$")
    data = fluid.graph(net.infer)._repr_mimebundle_()
    assert "image/svg+xml" not in data
    page = data["text/html"]
    assert "graph could not be drawn" in page and "crashed (SIGSEGV)" in page
    assert "How to fix it:" in page and "detail=&#x27;ops&#x27;" in page
    assert html.escape(net.infer.text.rstrip("\n")) in page       # the text form, too
    assert "crashed (SIGSEGV)" in data["text/plain"]
    display._SVG_CACHE.clear()


def test_a_graphviz_timeout_is_explained_in_the_cell(net, tmp_path, monkeypatch):
    _fake_dot(tmp_path, monkeypatch, "sleep 5")
    data = fluid.graph(net.infer, timeout=0.2)._repr_mimebundle_()
    assert "did not finish within 0.2 s" in data["text/html"]
    assert "font cache" in data["text/html"] and "dot -V" in data["text/plain"]
    display._SVG_CACHE.clear()


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
    from fluid_interactive.runtime.live.compiled import CompiledProgram
    assert CompiledProgram not in shell.display_formatter.formatters["image/svg+xml"].type_printers


def test_graph_options(ip, net, tmp_path):
    full = fluid.graph(net)
    fwd = fluid.graph(net, forward_only=True)
    ops = fluid.graph(net, detail="ops")
    assert "optimizer: sgd" in full.dot and "sgd" not in fwd.dot
    assert '"sgd"' in ops.dot and '"sgd"' not in full.dot      # op nodes only at op level
    assert fluid.graph(net, detail="ops", collapse_grads=True).dot != ops.dot
    assert "mul_grad" in fluid.graph(net, expand="backward").dot
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
    with pytest.raises(ValueError, match="detail"):
        fluid.graph(net, detail="everything")


def test_big_programs_collapse_by_default_at_op_level(ip, net, monkeypatch):
    monkeypatch.setattr(display, "AUTO_COLLAPSE_OPS", 5)
    assert fluid.graph(net, detail="ops").dot == fluid.graph(
        net, detail="ops", collapse_grads=True).dot
    assert fluid.graph(net.infer, detail="ops").dot == fluid.graph(
        net.infer, detail="ops", collapse_grads=False).dot


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
    assert "send / recv" in g.dot and "cluster_p2" in g.dot and "trainer 0" in g.dot
    assert "send" in plan.text() and g.title == "distributed plan"
    assert '"send"' in fluid.graph(plan, detail="ops").dot
    assert "trainer 1" in fluid.graph(plan, trainer=1).dot


@needs_dot
def test_names_from_a_program_never_reach_the_page_as_markup():
    class Hostile(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[2], dtype="float32")
            with fluid.var_scope("<script>alert(1)<\\script>"):
                return fluid.layers.fc(input=x, size=2, act="relu")

    prog = Hostile().Compile(seed=0)
    page = fluid.graph(prog)._repr_html_()
    assert "<script>alert" not in page and "alert(1)" in page      # shown, escaped
    assert page.count("<script>") == 1                              # ours alone
    assert "<script>alert" not in prog.summary()._repr_html_()
