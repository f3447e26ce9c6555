"""Loops and branches in the drawings: an op that runs a block (while, conditional_block,
recurrent, and their gradient ops) is one box, a folder named after what it runs, with
the edges of what it reads and writes around it; it opens into its body drawn by layer,
nested loops level by level; the op-level drawing shows the body as a cluster inside the
method. Nothing asks an op's type: a control-flow op renamed draws the same."""
import dataclasses
import re

import pytest

from fluid_interactive.ir.blocks import sub_block_index
from fluid_interactive.render import (
    block_to_dot,
    dots_to_svgs,
    has_dot,
    layer_drawings,
    program_to_dot,
)
from tests.render.loops import Branches, HandLSTM, NestedLoops
from tests.render.models import MLP3
from tests.render.test_dot import cluster_labels, clusters, edges, nodes
from tests.runtime.test_loops import TrainedRecurrence, _adding_class

needs_dot = pytest.mark.skipif(not has_dot(), reason="graphviz `dot` is not installed")


@pytest.fixture(scope="module")
def loop():
    """DESIGN §1's While, trained (block 3 and its body 4; a method ``step`` before it)."""
    return TrainedRecurrence().Compile(seed=0).program


@pytest.fixture(scope="module")
def nested():
    return NestedLoops().Compile(seed=0).program


@pytest.fixture(scope="module")
def rnn():
    """A tanh RNN in a StaticRNN (hidden 8), trained on its last step."""
    return _adding_class()().Compile(seed=0).program


def owner_ops(program, block):
    """(index, op, sub-block index) of the ops of ``block`` that run a block."""
    return [(i, op, sub_block_index(op)) for i, op in enumerate(block.ops)
            if sub_block_index(op) is not None]


def text(node):
    """The words of a box's HTML-like label, its lines joined by spaces."""
    return " ".join(" ".join(node.get("cells", [node.get("label", "")])).split())


def drawings(program, method):
    return {node: (label, dot) for node, label, dot in layer_drawings(program, method)}


# --- the box -----------------------------------------------------------------------------------

def test_a_loop_is_one_box_with_the_edges_of_what_it_reads_and_writes(loop):
    method = loop.block("train_step")
    (i, op, body), (_, grad_op, grad_body) = owner_ops(loop, method)
    dot = block_to_dot(loop, "train_step")
    ns, es = nodes(dot), edges(dot)
    box = ns[f"sb{body}"]
    assert box["shape"] == "folder" and "while" in box["label"]
    assert text(box).startswith("while_1 while ▸ body: 7 ops")    # what it is, its size
    assert "w f32[4,4]" in text(box)                               # the parameter it reads
    # nothing of the body is drawn in the method's drawing
    assert not [n for n in ns if n.startswith((f"op{body}.", f"g{body}.", f"v{body}:"))]
    # what it reads: the initial h and the counter (ops before it), the data x and n
    into = {src for src, dst in es if dst == f"sb{body}"}
    assert into == {"op3.0", "op3.1", "op3.2", "v3:x", "v3:n"}
    assert [dst for src, dst in es if src == f"sb{body}"] == ["g3.4"]  # h, to the loss
    assert box["tooltip"].startswith(f"while_1 (while): body, block {body}, 7 ops")


def test_the_gradient_op_is_a_box_between_the_backward_pass_and_the_optimizer(loop):
    (_, _, body), (_, grad_op, grad_body) = owner_ops(loop, loop.block("train_step"))
    dot = block_to_dot(loop, "train_step")
    ns, es = nodes(dot), edges(dot)
    box = ns[f"sb{grad_body}"]
    assert box["shape"] == "folder"
    assert text(box) == "while_1 while_grad ▸ gradient block: 6 ops"
    backward = next(n for n, a in ns.items() if a.get("shape") == "box3d")
    assert text(ns[backward]) == "backward 6 ops"      # the loop's gradient is not in it
    assert {src for src, dst in es if dst == f"sb{grad_body}"} == {backward}
    out = [(dst, a) for (src, dst), a in es.items() if src == f"sb{grad_body}"]
    assert len(out) == 1 and out[0][1]["lhead"] == "cluster_3_opt"   # w@GRAD, to sgd
    forward_only = nodes(block_to_dot(loop, "train_step", forward_only=True))
    assert f"sb{body}" in forward_only and f"sb{grad_body}" not in forward_only


def test_a_whole_program_draws_each_body_inside_its_method_not_beside_it(loop, nested):
    for program in (loop, nested):
        cs = clusters(program_to_dot(program))
        methods = {f"cluster_{b.idx}" for b in program.blocks if b.name}
        assert {c for c in cs if re.fullmatch(r"cluster_\d+", c)} == methods


# --- what it opens into ------------------------------------------------------------------------

def test_the_box_opens_into_its_body_drawn_by_layer(loop):
    (_, _, body), _ = owner_ops(loop, loop.block("train_step"))
    label, dot = drawings(loop, "train_step")[f"sb{body}"]
    assert label == "while_1 (while): body"
    assert cluster_labels(dot)[f"cluster_{body}"] == \
        f"while_1 (while): body, block {body}, 7 ops, in train_step"
    ns, es = nodes(dot), edges(dot)
    # what the body takes: the carried h and counter, the data x and n; w is in its box
    h, i, cond = "fill_constant_batch_size_like_1.tmp_0", "fill_constant_1.tmp_0", \
        "less_than_2.tmp_0"
    takes = {f"v{body}:{n}" for n in (h, i, "x", "n")}
    assert takes <= set(ns) and f"v{body}:w" not in ns
    matmul = next(n for n, a in ns.items() if "matmul_0" in text(a))
    assert "w f32[4,4]" in text(ns[matmul])
    assert f"cluster_{body}_s" + "cell" in clusters(dot)            # the var_scope's box
    # h and the counter are carried: a dashed edge back, which does not rank
    back = {src: a for (src, dst), a in es.items() if dst == f"v{body}:{h}"}
    assert len(back) == 1 and next(iter(back.values())) == {
        "style": "dashed", "tooltip": f"{h}: carried to the next run", "constraint": "false"}
    assert any(dst == f"v{body}:{i}" and a.get("style") == "dashed"
               for (src, dst), a in es.items())
    # the condition is only written: a plain edge to what the body gives
    assert [a for (src, dst), a in es.items() if dst == f"v{body}:{cond}"] == [{}]


def test_a_gradient_block_opens_into_the_gradient_of_each_layer(loop):
    """Each layer's gradient is a box (here one op each, drawn as itself), joined by the
    gradients they pass; the values the forward loop kept for the block are read, not
    drawn: the drawing goes from the gradients the block takes to those it gives."""
    _, (_, grad_op, grad_body) = owner_ops(loop, loop.block("train_step"))
    label, dot = drawings(loop, "train_step")[f"sb{grad_body}"]
    assert label == "while_1 (while_grad): gradient block"
    block = loop.blocks[grad_body]
    ns, es = nodes(dot), edges(dot)
    ops = {f"op{grad_body}.{k}" for k in range(len(block.ops))}
    assert ops == {n for n in ns if n.startswith("op")}
    assert {ns[n]["label"] for n in ops} == {op.type for op in block.ops}
    assert not {f"v{grad_body}:{n}" for n in block.feeds} & set(ns)      # kept values
    drawn = [n.split(":", 1)[1] for n in ns if n.startswith("v")]
    assert drawn and all("@GRAD" in n for n in drawn), drawn            # gradients only
    assert (f"op{grad_body}.0", f"op{grad_body}.1") in es
    assert f"v{grad_body}:{block.ops[0].output_names()[0]}" not in ns


def test_a_layer_of_several_ops_is_one_gradient_box_that_opens_op_by_op(rnn):
    (_, _, grad_step) = owner_ops(rnn, rnn.block("train_step"))[1]
    opened = drawings(rnn, "train_step")
    ns = nodes(opened[f"sb{grad_step}"][1])
    fc = [n for n, a in ns.items() if text(a).startswith("fc_0 gradient")]
    assert len(fc) == 1 and fc[0].startswith(f"g{grad_step}.")
    assert "ops" in text(ns[fc[0]]) and "w_0 f32[2,8]" in text(ns[fc[0]])   # its parameters
    label, dot = opened[fc[0]]
    assert label == "static_rnn_0 (recurrent_grad): gradient block › fc_0 gradient"
    assert {"mul_grad", "elementwise_add_grad"} <= {a.get("label") for a in nodes(dot).values()}


def test_the_backward_pass_opens_into_the_gradient_of_each_layer():
    program = MLP3().Compile(seed=0).program
    opened = drawings(program, "train_step")
    backward = next(n for n, (label, _) in opened.items() if label.endswith("backward pass"))
    ns, es = nodes(opened[backward][1]), edges(opened[backward][1])
    boxes = {text(a).split(" gradient")[0]: n for n, a in ns.items()}
    assert list(boxes) == ["mean_0", "softmax_with_cross_entropy_0", "fc_2", "fc_1", "fc_0"]
    assert all(n.startswith(f"{backward}/") for n in boxes.values())   # ids of their own
    chain = list(boxes.values())
    assert set(zip(chain, chain[1:])) == set(es)             # the gradient, layer to layer
    assert opened[boxes["fc_1"]][0] == "train_step: mlp/fc_1 gradient"


def test_nested_loops_open_level_by_level(nested):
    method = nested.block("train_step")
    (_, outer, outer_body), (_, outer_grad, outer_grad_body) = owner_ops(nested, method)
    ((_, inner, inner_body),) = owner_ops(nested, nested.blocks[outer_body])
    ((_, _, inner_grad_body),) = owner_ops(nested, nested.blocks[outer_grad_body])
    main = nodes(block_to_dot(nested, "train_step"))
    assert "1 nested block" in text(main[f"sb{outer_body}"])
    assert f"sb{inner_body}" not in main and f"sb{inner_grad_body}" not in main
    opened = drawings(nested, "train_step")
    outer_dot = opened[f"sb{outer_body}"][1]
    assert nodes(outer_dot)[f"sb{inner_body}"]["shape"] == "folder"   # the inner loop's box
    assert opened[f"sb{inner_body}"][0] == "while_0 (while): body › while_1 (while): body"
    inner_dot = opened[f"sb{inner_body}"][1]
    assert f"sb{inner_body}" not in nodes(inner_dot)
    assert {f"v{inner_body}:{n}" for n in ("w", "x")}.isdisjoint(nodes(inner_dot))
    # the gradient blocks nest the same way
    assert f"sb{inner_grad_body}" in nodes(opened[f"sb{outer_grad_body}"][1])
    assert opened[f"sb{inner_grad_body}"][0].count("›") == 1
    # the order: the method's boxes first, then what the bodies hold
    order = list(opened)
    assert order.index(f"sb{outer_body}") < order.index(f"sb{inner_body}")


def test_branches_are_boxes_too(tmp_path):
    program = Branches().Compile(seed=0).program
    method = program.block("step")
    owned = owner_ops(program, method)
    main = nodes(block_to_dot(program, "step"))
    assert [text(main[f"sb{b}"]).split(" ▸")[0] for _, _, b in owned] == [
        "while_0 while", "cond_0 conditional_block", "cond_0 conditional_block"]
    opened = drawings(program, "step")
    (_, _, loop_body) = owned[0]
    cases = [b for _, _, b in owner_ops(program, program.blocks[loop_body])]
    assert len(cases) == 2 and all(f"sb{b}" in nodes(opened[f"sb{loop_body}"][1])
                                   for b in cases)
    assert all(opened[f"sb{b}"][0].startswith("while_0 (while): body › switch_0") for b in cases)


def test_a_static_rnn_step_opens_into_its_layers(rnn):
    ((_, op, step), (_, _, grad_step)) = owner_ops(rnn, rnn.block("train_step"))
    main = nodes(block_to_dot(rnn, "train_step"))
    box = text(main[f"sb{step}"])
    assert box.startswith("static_rnn_0 recurrent ▸ body: 5 ops")
    assert all(f"{p} " in box for p in ("fc_0.w_0", "fc_0.w_1", "fc_0.b_0"))
    assert box.endswith("→ f32[?,?,8]")                  # the stacked outputs [T, B, 8]
    opened = drawings(rnn, "train_step")
    step_dot = opened[f"sb{step}"][1]
    ns, es = nodes(step_dot), edges(step_dot)
    fc = next(n for n, a in ns.items() if text(a).startswith("fc_0 fc"))
    feeds = rnn.blocks[step].feeds                        # the step's slice and memory
    assert {(f"v{step}:{n}", fc) for n in feeds} <= set(es)
    assert fc in opened and "fc_0" in opened[fc][0]       # the step's layer opens op by op
    assert f"sb{grad_step}" in opened


def test_the_op_level_drawing_shows_the_body_as_a_cluster(loop):
    method = loop.block("train_step")
    (i, op, body), (gi, grad_op, grad_body) = owner_ops(loop, method)
    dot = block_to_dot(loop, "train_step", detail="ops")
    ns, es, cs = nodes(dot), edges(dot), clusters(dot)
    assert "compound=true;" in dot
    assert f"op3.{i}" not in ns and f"op3.{gi}" not in ns      # the ops are their bodies
    inner = {f"op{body}.{k}" for k in range(len(loop.blocks[body].ops))}
    assert inner <= set(cs[f"cluster_{body}"]) and inner <= set(cs["cluster_3"])
    assert cluster_labels(dot)[f"cluster_{body}"] == \
        f"while_1 (while): body, block {body}, 7 ops"
    # the body's ops read the method's vars directly, and write them back dashed
    assert ("v3:x", f"op{body}.1") in es
    assert es[(f"op{body}.4", "v3:fill_constant_batch_size_like_1.tmp_0")]["style"] == "dashed"
    # what the op itself reads (the condition) and makes (its kept values) meet the border
    cond = [(s, a) for (s, d), a in es.items() if s == "v3:less_than_2.tmp_0"
            and a.get("lhead") == f"cluster_{body}"]
    assert len(cond) == 1
    assert any(a.get("ltail") == f"cluster_{body}" and d == "v3:while_1.step_scopes"
               for (s, d), a in es.items())
    assert f"cluster_{grad_body}" in cs
    collapsed = block_to_dot(loop, "train_step", detail="ops", collapse_grads=True)
    assert f"cluster_{grad_body}" not in clusters(collapsed)   # folded with the backward ops


def test_nested_bodies_nest_in_the_op_level_drawing(nested):
    method = nested.block("train_step")
    (_, _, outer_body), _ = owner_ops(nested, method)
    ((_, _, inner_body),) = owner_ops(nested, nested.blocks[outer_body])
    cs = clusters(program_to_dot(nested, detail="ops"))
    inner = set(cs[f"cluster_{inner_body}"])
    assert inner and inner <= set(cs[f"cluster_{outer_body}"]) <= set(cs["cluster_1"])


def test_nothing_asks_the_op_type(loop):
    """A control-flow op under a type no spec knows draws the same, labelled with it."""
    method = loop.block("train_step")
    (i, op, body), _ = owner_ops(loop, method)
    renamed = dataclasses.replace(method, ops=list(method.ops))
    renamed.ops[i] = dataclasses.replace(op, type="my_loop")
    program = dataclasses.replace(loop, blocks=[renamed if b.idx == method.idx else b
                                                for b in loop.blocks])
    before, after = block_to_dot(loop, "train_step"), block_to_dot(program, "train_step")
    assert after == before.replace("while</font>", "my_loop</font>").replace(
        "while_1 (while)", "while_1 (my_loop)")
    assert f"sb{body}" in drawings(program, "train_step")


def test_same_program_same_text(loop, rnn):
    for program in (loop, rnn):
        assert block_to_dot(program, "train_step") == block_to_dot(program, "train_step")
        assert layer_drawings(program) == layer_drawings(program)


def _width(svg):
    return float(re.search(r'<svg width="([\d.]+)pt"', svg).group(1)) * 4 / 3


@needs_dot
def test_the_drawings_and_the_bodies_fit_the_output_area(loop, nested, rnn):
    """Every drawing of these programs by layer, and everything its boxes open into, is at
    most 1,100 px wide (the notebook's budget): none needs shrinking to be read."""
    for program in (loop, nested, rnn):
        texts = [block_to_dot(program, "train_step")]
        texts += [dot for node, _, dot in layer_drawings(program)
                  if node.startswith("sb")]
        widths = [_width(svg) for svg in dots_to_svgs(texts)]
        assert max(widths) <= 1100, (program.name, widths)


#: What a notebook gives an opened drawing at a 1280 px window (an 848 px output area less
#: the margin of the box it opens in), and the smallest node label that must reach a
#: reader, as the other drawings' labels do (docs/graphs.md, "How wide").
OPENED_AREA_PX, LABEL_FLOOR_PX = 816, 10.5


def _smallest_label_px(svg):
    """The smallest node label of ``svg`` shown at most OPENED_AREA_PX wide, in px."""
    scale = min(1.0, OPENED_AREA_PX / _width(svg))
    sizes = [float(s) for node in re.findall(r'<g id="[^"]*" class="node">(.*?)</g>', svg, re.S)
             for s in re.findall(r'font-size="([\d.]+)"', node)]
    return min(sizes) * 4 / 3 * scale


@needs_dot
def test_every_drawing_a_box_opens_into_reads_at_the_label_floor(loop, nested, rnn):
    """The body and the gradient block of a hand-written LSTM cell, the backward pass by
    layer and each layer's ops: every one keeps its node labels at least 10.5 px tall in
    the space a notebook gives it (drawn op by op, the LSTM's gradient block had 10.4 px
    labels and its method's backward pass 4.1 px)."""
    for program in (loop, nested, rnn, HandLSTM().Compile(seed=0).program,
                    MLP3().Compile(seed=0).program):
        drawn = layer_drawings(program)
        svgs = dots_to_svgs([dot for _, _, dot in drawn])
        sizes = {node: round(_smallest_label_px(svg), 1) for (node, _, _), svg in zip(drawn, svgs)}
        assert min(sizes.values()) >= LABEL_FLOOR_PX, (program.name, sizes)
