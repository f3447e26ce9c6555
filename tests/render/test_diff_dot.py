"""The drawing of a program difference: changed ops orange, added green, removed red and
dashed, state that starts again next to the ops using it; names are quoted; it lays out."""
import re
import shutil
import subprocess

import pytest

import fluid
from fluid_interactive.render.diff_dot import LOOKS, diff_to_dot


def make(act="relu", scope="net", layers=1, lr=0.1):
    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[3], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            with fluid.var_scope(scope):
                h = x
                for _ in range(layers):
                    h = fluid.layers.fc(input=h, size=4, act=act)
                p = fluid.layers.fc(input=h, size=1)
            cost = fluid.layers.mean(fluid.layers.square_error_cost(input=p, label=y))
            fluid.optimizer.SGD(learning_rate=lr).minimize(cost)
            return cost
    return Net


def nodes(dot):
    """node id -> its attribute text."""
    return dict(re.findall(r'^\s*("(?:[^"\\]|\\.)*") \[(.*)\];$', dot, re.M))


def filled(dot, kind):
    fill = LOOKS[kind][0]
    return [attrs for attrs in nodes(dot).values() if f'fillcolor="{fill}"' in attrs]


def test_changed_ops_are_highlighted_and_nothing_else():
    dot = diff_to_dot(fluid.diff(make("relu"), make("tanh")))
    changed = filled(dot, "changed")
    assert len(changed) == 2
    labels = sorted(re.search(r'label="([^"]*)"', a).group(1) for a in changed)
    assert labels == ["relu -> tanh", "relu_grad -> tanh_grad"]
    assert 'tooltip="type relu -> tanh"' in dot
    assert not filled(dot, "added") and not filled(dot, "removed")
    assert "unchanged: block 0" in dot


def test_added_removed_and_reinitialised_state():
    d = fluid.diff(make(layers=2), make(layers=1))
    dot = diff_to_dot(d)
    removed = [c for b in d.blocks for c in b.ops if c.kind == "removed"]
    removed_nodes = [a for a in filled(dot, "removed") if 'shape="ellipse"' in a]
    assert len(removed_nodes) == len(removed) > 0
    assert all("dashed" in attrs for attrs in removed_nodes)
    dropped = [a for a in nodes(dot).values() if "[param, dropped]" in a]
    assert len(dropped) == 2
    reinit = [a for a in nodes(dot).values() if "[param, reinitialised]" in a]
    assert reinit and all(f'fillcolor="{LOOKS["reinitialised"][0]}"' in a for a in reinit)


def test_large_blocks_draw_only_what_changed_and_its_neighbours():
    d = fluid.diff(make(layers=8), make(layers=8, act="tanh"))
    full = diff_to_dot(d, context_limit=1000)
    near = diff_to_dot(d, context_limit=10)
    assert len(nodes(near)) < len(nodes(full))
    assert "unchanged ops not drawn" in near
    assert len(filled(near, "changed")) == len(filled(full, "changed")) == 16   # 8 + 8 grads


def test_names_from_the_program_are_quoted():
    dot = diff_to_dot(fluid.diff(make(scope='we"ird\\', layers=2), make(scope='we"ird\\')))
    assert 'we\\"ird\\\\' in dot
    for line in dot.splitlines():
        assert line.count('"') % 2 == 0 or '\\"' in line


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_it_lays_out():
    dot = diff_to_dot(fluid.diff(make(layers=2, scope='a"b'), make(act="tanh", scope='a"b')))
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert "<svg" in svg and LOOKS["changed"][1] in svg and LOOKS["added"][1] in svg


def test_the_legend_lists_what_is_drawn():
    dot = diff_to_dot(fluid.diff(make("relu"), make("tanh")))
    legend = dot[dot.index('"legend"'):]
    assert "changed op" in legend and "unchanged op" in legend
    assert "added op" not in legend and "removed op" not in legend
    assert '"legend"' not in diff_to_dot(fluid.diff(make(), make()))
