"""The one DOT builder every drawing writes through: statements in order, clusters nested,
every id, string and cluster name from a program quoted so graphviz reads it back exactly."""
import re
import shutil
import subprocess
from html import unescape

import pytest

from fluid_interactive.render.builder import Body, Digraph, Raw, attrs, html, quote


def test_a_graph_nests_clusters_and_keeps_the_order_of_statements():
    g = Digraph("net", graph=[("rankdir", "TB")], node=[("fontsize", 10)],
                edge=[("arrowsize", 0.6)], statements=[("compound", True), ("label", "t")])
    outer = g.cluster("1", [("label", "train_step"), ("style", "rounded")])
    outer.node("a", [("shape", "box")])
    inner = outer.cluster("1_s", [("label", "mlp")])
    inner.node("b")
    g.edge("a", "b", [("style", "dashed"), ("constraint", False), ("weight", 2)])
    assert g.text().splitlines() == [
        'digraph "net" {',
        '  graph [rankdir="TB"];',
        "  compound=true;",
        '  label="t";',
        "  node [fontsize=10];",
        "  edge [arrowsize=0.6];",
        "  subgraph cluster_1 {",
        '    label="train_step"; style="rounded";',
        '    "a" [shape="box"];',
        "    subgraph cluster_1_s {",
        '      label="mlp";',
        '      "b";',
        "    }",
        "  }",
        '  "a" -> "b" [style="dashed", constraint=false, weight=2];',
        "}"]


def test_bodies_are_spliced_where_they_are_added():
    part = Body()
    part.node("x")
    assert not Body() and part
    g = Digraph("g")
    g.node("first")
    g.add(part)
    g.node("last")
    assert [line.strip() for line in g.text().splitlines()[1:-1]] == [
        '"first";', '"x";', '"last";']


def test_strings_ids_and_cluster_names_are_quoted():
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert attrs([("label", Raw("<<b>x</b>>")), ("tooltip", 'say "hi"')]) == \
        '[label=<<b>x</b>>, tooltip="say \\"hi\\""]'
    assert html('<a href="x">&</a>') == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
    g = Digraph('we"ird')
    g.cluster('s p"a}ce', [("label", "x")]).node('n"1')
    text = g.text()
    assert 'digraph "we\\"ird" {' in text
    assert 'subgraph "cluster_s p\\"a}ce" {' in text and '"n\\"1";' in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_graphviz_draws_every_name_as_written():
    """Labels read exactly as given; ids stay apart however odd (each is its own node)."""
    names = ['q"uote', "back\\slash", "brace}{", "semi;colon", "x -> y", "<b>tag</b>"]
    g = Digraph("names")
    c = g.cluster('odd "name"', [("label", "cluster }")])
    for k, name in enumerate(names):
        c.node(f"n{k}", [("label", name)])
        g.node(name, [("label", f"id {k}")])
    g.edge(names[0], names[1])
    svg = subprocess.run(["dot", "-Tsvg"], input=g.text(), capture_output=True, text=True,
                         check=True, timeout=60).stdout
    texts = [unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert set(names) | {f"id {k}" for k in range(len(names))} | {"cluster }"} <= set(texts)
    assert svg.count('class="node"') == 2 * len(names) and svg.count('class="edge"') == 1
