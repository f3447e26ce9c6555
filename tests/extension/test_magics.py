"""%fluid programs / vars / device / graph / live / traceback / explore and %%fluid."""
import shutil

import numpy as np
import pytest

pytest.importorskip("IPython")
from IPython.core.error import UsageError

import fluid
from fluid.display import Graph, Table
from tests.extension.helpers import DATA_CELL, NET_CELL, run, run_capture


@pytest.fixture
def net(ip):
    run(ip, NET_CELL)
    run(ip, DATA_CELL)
    run(ip, "net = Net(hidden=5).Compile(seed=1)\nfor _ in range(3): net.train_step(X, Y)")
    return ip.user_ns["net"]


def test_programs_table(ip, net):
    run(ip, "other = Net().Compile(seed=2)")
    table = ip.run_line_magic("fluid", "programs")
    assert isinstance(table, Table)
    rows = {r[0]: dict(zip(table.columns, r)) for r in table.rows}
    assert set(rows) >= {"net", "other"}
    row = rows["net"]
    n_params = sum(v.size for v in net.parameters().values())
    assert row["class"] == "Net"
    assert row["methods"] == "train_step, infer"
    assert row["blocks"] == "3"
    assert row["parameters"] == f"{n_params:,}"
    assert row["device"] == "cpu"
    assert row["bytes"].endswith("B")
    html = table._repr_html_()
    assert "<table" in html and "Net" in html


def test_vars_table_statistics(ip, net):
    table = ip.run_line_magic("fluid", "vars net")
    assert table.columns == ["name", "shape", "dtype", "bytes", "device", "min", "max", "mean"]
    assert table.column("name") == net.var_names()
    w = net.get_var("net/fc_0.w_0")
    row = dict(zip(table.columns, table.rows[table.column("name").index("net/fc_0.w_0")]))
    assert row["shape"] == "[3,5]" and row["dtype"] == "float32"
    assert row["bytes"] == "60 B" and row["device"] == "cpu"
    assert float(row["min"]) == pytest.approx(w.min(), rel=1e-3)
    assert float(row["max"]) == pytest.approx(w.max(), rel=1e-3)
    assert float(row["mean"]) == pytest.approx(w.mean(), rel=1e-3, abs=1e-4)
    assert "net/fc_0.w_0" in repr(table)


def test_device(ip, capsys):
    before = fluid.get_device()
    try:
        ip.run_line_magic("fluid", "device cpu")
        assert fluid.get_device() == "cpu"
        ip.run_line_magic("fluid", "device")
        assert "compile for cpu" in capsys.readouterr().out
        with pytest.raises(UsageError, match="cpu, gpu or auto"):
            ip.run_line_magic("fluid", "device tpu")
    finally:
        fluid.set_device(before)


def test_device_gpu_without_gpu_is_a_usage_error(ip):
    from fluid_interactive.backend import _cupy_with_gpu
    if _cupy_with_gpu() is not None:
        pytest.skip("this machine has a GPU")
    with pytest.raises(UsageError, match="device gpu"):
        ip.run_line_magic("fluid", "device gpu")
    assert fluid.get_device() == "cpu"


def test_graph_of_program_and_method(ip, net, capsys):
    g = ip.run_line_magic("fluid", "graph net")
    assert isinstance(g, Graph) and "train_step" in g.dot and "infer" in g.dot
    g = ip.run_line_magic("fluid", "graph net.infer")
    assert "infer" in g.dot and "block 1: train_step" not in g.dot
    g = ip.run_line_magic("fluid", "graph net.train_step --forward-only")
    assert "sgd" not in g.dot and "mul" in g.dot
    ip.run_line_magic("fluid", "graph net.train_step --collapse-grads --dot")
    assert capsys.readouterr().out.startswith("digraph")
    grouped = ip.run_line_magic("fluid", "graph net.train_step")
    ops = ip.run_line_magic("fluid", "graph net.train_step --ops")
    assert 'label="mul"' in ops.dot and 'label="mul"' not in grouped.dot
    assert "optimizer: sgd" in grouped.dot
    if shutil.which("dot"):
        assert "<svg" in g._repr_mimebundle_()["image/svg+xml"]


@pytest.mark.parametrize("line, message", [
    ("", "needs a subcommand"),
    ("bogus", "invalid choice"),
    ("vars", "needs a compiled program"),
    ("vars nothing_here", "cannot evaluate"),
    ("vars np", "not a compiled\nprogram|not a compiled program"),
    ("vars net;os", "expected a variable name"),
    ("graph", "needs a program or method"),
    ("graph X", "give a compiled program"),
    ("programs net", "takes no argument"),
    ("live maybe", "on or off"),
    ("traceback some", "user or full"),
    ("graph net --no-such-flag", "unrecognized arguments"),
])
def test_bad_input_is_a_usage_error(ip, net, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("fluid", line)


def test_usage_error_in_a_cell_shows_one_line(ip, net):
    result, out, err = run_capture(ip, "%fluid vars nothing_here")
    assert isinstance(result.error_in_exec, UsageError)
    assert "UsageError: %fluid vars: cannot evaluate" in out + err
    assert "Traceback" not in out + err


def test_live_on_off(ip, capsys):
    ip.run_line_magic("fluid", "live off")
    assert fluid.live_reload() is False
    ip.run_line_magic("fluid", "live on")
    assert fluid.live_reload() is True
    assert "live reload is on" in capsys.readouterr().out


def test_cell_magic_compiles_binds_and_draws(ip):
    run(ip, "import numpy as np")
    shown = []
    ip.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
    try:
        run(ip, "%%fluid --as tiny --seed 3\n"
                "class Tiny(fluid.Program):\n"
                "    @fluid.network('x')\n"
                "    def f(self, x):\n"
                "        x = fluid.layers.data(name='x', shape=[2], dtype='float32')\n"
                "        return fluid.layers.fc(input=x, size=1)\n"
                "value = 42\n")
    finally:
        del ip.display_pub.publish
    assert ip.user_ns["value"] == 42
    tiny = ip.user_ns["tiny"]
    assert isinstance(tiny, fluid.CompiledProgram) and list(tiny.methods) == ["f"]
    again = ip.user_ns["Tiny"]().Compile(seed=3)
    np.testing.assert_array_equal(tiny.get_var("fc_0.w_0"), again.get_var("fc_0.w_0"))
    assert len(shown) == 1
    key = "image/svg+xml" if shutil.which("dot") else "text/plain"
    assert key in shown[0]
    if shutil.which("dot"):
        assert 'class="fluid-graph"' in shown[0]["text/html"]


def test_cell_magic_draws_by_op_when_asked(ip):
    shown = []
    ip.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
    cell = ("class Tiny(fluid.Program):\n"
            "    @fluid.network('x')\n"
            "    def f(self, x):\n"
            "        x = fluid.layers.data(name='x', shape=[2], dtype='float32')\n"
            "        return fluid.layers.fc(input=x, size=1, act='relu')\n")
    try:
        run(ip, "%%fluid --as a\n" + cell)
        run(ip, "%%fluid --as b --ops\n" + cell)
    finally:
        del ip.display_pub.publish
    assert "label=\"relu\"" not in fluid.graph(ip.user_ns["a"]).dot
    assert "label=\"relu\"" in fluid.graph(ip.user_ns["b"], detail="ops").dot
    if shutil.which("dot"):
        assert ">relu<" not in shown[0]["image/svg+xml"] and ">relu<" in shown[1]["image/svg+xml"]


def test_cell_magic_as_needs_exactly_one_class(ip):
    with pytest.raises(UsageError, match="exactly one"):
        run(ip, "%%fluid --as p\nx = 1\n")
    with pytest.raises(UsageError, match="variable name"):
        run(ip, "%%fluid --as 1p\nx = 1\n")


def test_cell_magic_error_points_at_the_cell(ip):
    result, out, err = run_capture(ip, (
        "%%fluid\n"
        "class Broken(fluid.Program):\n"
        "    @fluid.network('x')\n"
        "    def f(self, x):\n"
        "        x = fluid.layers.data(name='x', shape=[2], dtype='float32')\n"
        "        h = fluid.layers.fc(input=x, size=3)\n"
        "        return fluid.layers.elementwise_add(h, x)\n"))
    assert isinstance(result.error_in_exec, fluid.ShapeError)
    text = out + err
    assert "return fluid.layers.elementwise_add(h, x)" in text
    assert "magics.py" not in text and "fluid_interactive" not in text.split("ShapeError:")[0]


def test_explore_magic(ip, net):
    shown = ip.run_line_magic("fluid", "explore net")
    assert "net/fc_0.w_0" in repr(shown)   # outside a kernel: the static table
