"""The grouped drawing (the default, ``detail="layers"``): one node per layer, var_scopes as
boxes, the backward pass folded, one optimizer node per parameter, programs and methods
stacked downwards, and drawings that stay narrow enough to read in a notebook cell."""
import re

import pytest

import fluid
from fluid_interactive import render
from fluid_interactive.ir.layers import in_scope, layer_of, layer_type, scope_of
from fluid_interactive.render import (
    block_to_dot,
    dot_to_svg,
    dots_to_svgs,
    has_dot,
    layer_drawings,
    program_to_dot,
    split_to_dot,
)
from fluid_interactive.render.grouped import _strip_prefix
from fluid_interactive.render.groups import group_ops
from tests.render.models import MLP3, DigitsMLP
from tests.render.test_dot import clusters, edges, nodes

needs_dot = pytest.mark.skipif(not has_dot(), reason="graphviz `dot` is not installed")


class Shared(fluid.Program):
    """One layer used twice in a method (a GAN's discriminator on real and fake data)."""

    def score(self, x):
        with fluid.var_scope("d"):
            return fluid.layers.fc(input=x, size=1, act="sigmoid")

    @fluid.network("a", "b")
    def both(self, a, b):
        a = fluid.layers.data(name="a", shape=[3], dtype="float32")
        b = fluid.layers.data(name="b", shape=[3], dtype="float32")
        return self.score(a) + self.score(b)


@pytest.fixture(scope="module")
def mlp():
    return MLP3().Compile(seed=0).program


@pytest.fixture(scope="module")
def plan():
    return fluid.transpile(DigitsMLP().Compile(seed=0), main="train", trainers=2, pservers=2,
                           min_block_size=1024)


def plan_dot(plan, **options):
    """The split of a transpile plan: trainer 0, then each server (as fluid.graph draws it)."""
    programs = {"trainer 0": plan.trainer_program(0)}
    programs.update((f"pserver {ep}", plan.pserver_program(ep)) for ep in plan.endpoints)
    return split_to_dot(programs, plan.edges(0), **options)


def cluster_labels(dot):
    out, current = {}, None
    for line in dot.splitlines():
        m = re.match(r'^\s*subgraph (cluster_\w+) \{$', line)
        if m:
            current = m.group(1)
        m = re.match(r'^\s*label="((?:[^"\\]|\\.)*)";', line)
        if m and current is not None and current not in out:
            out[current] = m.group(1)
    return out


def node_text(node):
    return re.sub(r"<[^>]*>", " ", node.get("label", "")) if "cells" not in node else \
        node["label"]


# --- names -----------------------------------------------------------------------------------

def test_layer_and_scope_of_a_name():
    assert layer_of("mlp/fc_0.tmp_2") == "mlp/fc_0"
    assert layer_of("mlp/fc_0.w_0@GRAD") == "mlp/fc_0"
    assert layer_of("a/b/conv2d_3.w_0") == "a/b/conv2d_3" and scope_of("a/b/conv2d_3") == "a/b"
    assert layer_of("avg_cost") == "avg_cost" and scope_of("avg_cost") == ""
    assert layer_type("mlp/fc_12") == "fc" and layer_type("batch_norm_0") == "batch_norm"
    assert in_scope("mlp/fc_0.tmp_2", "mlp") and in_scope("mlp/fc_0.tmp_2", "mlp/")
    assert in_scope("mlp/fc_0.tmp_2", "mlp/fc_0") and not in_scope("mlp/fc_10.tmp_0", "mlp/fc_1")
    assert not in_scope("mlp2/fc_0.tmp_0", "mlp")


@pytest.mark.parametrize("name, owner, short", [
    ("mlp/fc_0.w_0", "mlp/fc_0", "w_0"),
    ("mlp/fc_0.w_0_moment1_0", "mlp/fc_0.w_0", "moment1_0"),
    ("mlp/fc_0.w_0_moment1_0.block1", "mlp/fc_0.w_0.block1", "moment1_0"),
    ("mlp/fc_10.w_0", "mlp/fc_1", "fc_10.w_0"),
    ("learning_rate_0", "mlp/fc_0.w_0", "learning_rate_0"),
])
def test_names_inside_a_box_drop_what_they_share_with_its_owner(name, owner, short):
    assert _strip_prefix(name, owner) == short


# --- one method --------------------------------------------------------------------------

def test_a_layer_is_one_node_inside_its_scope(mlp):
    dot = block_to_dot(mlp, "train_step")
    ns, cs, labels = nodes(dot), clusters(dot), cluster_labels(dot)
    scope = next(c for c, label in labels.items() if label == "mlp")
    layer_nodes = [n for n in cs[scope] if n in ns]
    assert len(layer_nodes) == 3
    texts = [node_text(ns[n]) for n in layer_nodes]
    for k, (w, b) in enumerate([("f32[64,128]", "f32[128]"), ("f32[128,64]", "f32[64]"),
                                ("f32[64,10]", "f32[10]")]):
        assert f"fc_{k}" in texts[k] and f"w_0 {w}" in texts[k] and f"b_0 {b}" in texts[k]
    # the ops of a layer are not drawn one by one
    assert not {"mul", "relu", "elementwise_add"} & {ns[n].get("label") for n in ns}


def test_backward_is_folded_and_the_optimizer_is_one_node_per_parameter(mlp):
    dot = block_to_dot(mlp, "train_step")
    ns, cs, labels = nodes(dot), clusters(dot), cluster_labels(dot)
    backward = [n for n in ns if "backward" in node_text(ns[n])]
    assert len(backward) == 1 and "ops" in node_text(ns[backward[0]])
    opt = next(c for c, label in labels.items() if label.startswith("optimizer: adam"))
    assert "6 parameters" in labels[opt] and "learning_rate_0" in labels[opt]
    params = [node_text(ns[n]) for n in cs[opt]]
    assert len(params) == 6
    assert "mlp/fc_0.w_0" in params[0] and "mlp/fc_0.b_0" in params[1]   # declared order
    assert all("moment1_0" in p and "beta2_pow_acc_0" in p for p in params)
    assert not any("learning_rate_0" in p for p in params)   # named once, on the cluster
    # no accumulator is a node of its own, and the loss leads into the backward pass
    assert not any("moment" in n for n in ns)
    es = edges(dot)
    loss = next(n for n in ns if ns[n].get("peripheries") == "2")
    assert (loss, backward[0]) in es
    into_opt = [e for e, a in es.items() if a.get("lhead") == opt]
    assert into_opt and all(src == backward[0] for src, _ in into_opt)


def test_the_text_in_boxes_and_tooltips_is_escaped():
    class Odd(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[2], dtype="float32")
            with fluid.var_scope('a"b<c>'):
                return fluid.layers.fc(input=x, size=2, act="relu")

    dot = program_to_dot(Odd().Compile(seed=0))
    assert 'a"b<c>' not in dot
    assert "a&quot;b&lt;c&gt;" in dot or 'a\\"b<c>' in dot
    if has_dot():
        assert "</svg>" in dot_to_svg(dot)


def test_expand_draws_a_layer_a_scope_or_the_backward_pass_op_by_op(mlp):
    one = block_to_dot(mlp, "train_step", expand="mlp/fc_1")
    labels = cluster_labels(one)
    assert "mlp/fc_1" in labels.values()
    ops = {a.get("label") for a in nodes(one).values()}
    assert {"mul", "elementwise_add", "relu"} <= ops
    assert "v1:mlp/fc_1.tmp_0" in nodes(one)          # the layer's own vars
    scope = block_to_dot(mlp, "train_step", expand="mlp")
    assert {"mlp/fc_0", "mlp/fc_1", "mlp/fc_2"} <= set(cluster_labels(scope).values())
    back = block_to_dot(mlp, "train_step", expand="backward")
    assert {"mul_grad", "relu_grad"} <= {a.get("label") for a in nodes(back).values()}
    assert {"mul_grad"} - {a.get("label") for a in nodes(one).values()}


def test_forward_only_leaves_out_training(mlp):
    dot = program_to_dot(mlp, forward_only=True)
    assert "backward" not in dot and "optimizer" not in dot and "adam" not in dot
    assert dot.count("fc_0") >= 2      # both methods still draw their layers


def test_a_layer_used_twice_is_two_nodes_that_follow_the_data():
    dot = program_to_dot(Shared().Compile(seed=0))
    ns, es = nodes(dot), edges(dot)
    calls = [n for n in ns if "fc_0" in node_text(ns[n])]
    assert len(calls) == 2 and any("fc_0 (2)" in node_text(ns[n]) for n in calls)
    assert ("v1:a", calls[0]) in es and ("v1:b", calls[1]) in es


def test_groups_follow_roles_not_op_names(mlp):
    block = mlp.block("train_step")
    kinds = [g.kind for g in group_ops(mlp, block)]
    assert kinds.count("backward") == 1 and kinds.count("optimize") == 6
    assert all(k in ("forward", "backward", "optimize") for k in kinds)
    assert [g.kind for g in group_ops(mlp, block, forward_only=True)] == ["forward"] * 5


def test_same_program_same_text(mlp):
    assert program_to_dot(mlp) == program_to_dot(MLP3().Compile(seed=0).program)


def test_detail_must_be_known(mlp):
    with pytest.raises(ValueError, match="'layers'.*'ops'"):
        program_to_dot(mlp, detail="nodes")


# --- several methods, several programs --------------------------------------------------------

def _ranked_below(dot, upper, lower):
    """Some invisible edge runs from a node of cluster ``upper`` to one of ``lower``."""
    cs = clusters(dot)
    return any(src in cs[upper] and dst in cs[lower] and a.get("style") == "invis"
               for (src, dst), a in edges(dot).items())


def test_stack_methods_puts_method_blocks_one_under_the_other(mlp):
    side = program_to_dot(mlp)
    stacked = program_to_dot(mlp, stack_methods=True)
    assert not _ranked_below(side, "cluster_1", "cluster_2")
    assert _ranked_below(stacked, "cluster_1", "cluster_2")


def test_split_stacks_trainer_then_each_server(plan):
    dot = plan_dot(plan)
    labels = cluster_labels(dot)
    assert labels["cluster_p0"] == "trainer 0" and labels["cluster_p1"].startswith("pserver")
    assert _ranked_below(dot, "cluster_p0", "cluster_p1")
    assert _ranked_below(dot, "cluster_p1", "cluster_p2")
    ns = nodes(dot)
    # a server's optimize block is one node: its parameter block and the optimizer's state
    servers = [n for n in ns if n.startswith(("p1.", "p2.")) and "adam" in node_text(ns[n])]
    blocks = sum(len(plan.pserver_program(ep).blocks) - 1 for ep in plan.endpoints)
    assert len(servers) == blocks > 6       # some parameters are split into blocks
    assert not any("block 1: optimize:" in label for label in labels.values())
    # the sends and receives between two programs are merged, labelled with their count
    cross = [(e, a) for e, a in edges(dot).items() if a.get("color") == "#7b3fa0"]
    assert 2 <= len(cross) <= 4 * 2
    assert all(re.fullmatch(r"\d+ vars?|.+", a["xlabel"]) for _, a in cross)
    assert all("\\n" in a["tooltip"] or "@" in a["tooltip"] for _, a in cross)


def test_split_edge_ends_are_checked(plan):
    programs = {"t": plan.trainer_program(0)}
    with pytest.raises(KeyError, match="program 'nope'"):
        split_to_dot(programs, [("t", "x", "nope", "x")])
    with pytest.raises(KeyError, match="no variable 'missing'"):
        split_to_dot(programs, [("t", "missing", "t", "x")])
    with pytest.raises(ValueError, match="cross-program edge"):
        split_to_dot(programs, [("t", "x")])


# --- layers op by op, and laying several drawings out at once ---------------------------------

def test_layer_drawings_match_the_grouped_nodes(mlp):
    grouped = nodes(program_to_dot(mlp, ["train_step"]))
    drawings = layer_drawings(mlp, ["train_step"])
    labels = [label for _, label, _ in drawings]
    assert labels[:4] == ["mlp/fc_0", "mlp/fc_1", "mlp/fc_2", "train_step: backward pass"]
    # then what the backward pass's boxes open into: each layer's gradient, op by op
    assert labels[4:] == [f"train_step: {layer} gradient" for layer in (
        "mean_0", "softmax_with_cross_entropy_0", "mlp/fc_2", "mlp/fc_1", "mlp/fc_0")]
    for node, _label, dot in drawings:
        assert node in grouped or node.startswith(drawings[3][0] + "/")
        assert dot.startswith("digraph") and "cluster_1" in dot
    fc1 = nodes(drawings[1][2])
    assert {"mul", "elementwise_add", "relu"} <= {a.get("label") for a in fc1.values()}
    assert "v0:mlp/fc_1.w_0" in fc1     # its parameters, as free nodes


@needs_dot
def test_dots_to_svgs_lays_out_many_drawings_in_one_run(mlp):
    texts = [d for _, _, d in layer_drawings(mlp)]
    svgs = dots_to_svgs(texts)
    assert len(svgs) == len(texts) and all(s.startswith("<svg") and s.endswith("</svg>")
                                          for s in svgs)
    assert dots_to_svgs([]) == []


# --- readable at notebook size ----------------------------------------------------------------

def _width_px(svg):
    return float(re.search(r'<svg[^>]*width="([\d.]+)pt"', svg).group(1)) * 4 / 3


@needs_dot
def test_real_programs_stay_narrow(mlp, plan):
    """Fitted into a ~1100 px cell, 10 pt labels stay >= 9 px tall while a drawing is at
    most ~1600 px wide; these stay well under (the op-level drawings were 5,700 and
    30,000 px wide)."""
    for dot in (block_to_dot(mlp, "train_step"), program_to_dot(mlp, stack_methods=True),
                plan_dot(plan, stack_methods=True)):
        assert _width_px(dot_to_svg(dot)) < 1400
    assert _width_px(dot_to_svg(program_to_dot(mlp, detail="ops"))) > 2000


def test_render_exports():
    assert {"layer_drawings", "dots_to_svgs", "DETAILS"} <= set(render.__all__)
    assert render.DETAILS == ("layers", "ops")
