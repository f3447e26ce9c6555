"""The render layer at op level (``detail="ops"``): DOT text for programs, blocks and the
trainer/pserver split; SVG via dot. The grouped drawing is tested in test_grouped.py.

The two models sit at the top of this file on purpose: op tooltips carry ``test_dot.py:<line>``
and the golden files record those lines, so tests added further down never move them.
After an intended change of the drawing (or of the ops a layer emits), regenerate the golden
files with ``FLUID_UPDATE_GOLDEN=1 python3 -m pytest tests/render`` and review the diff.
"""
import ast
import functools
import html
import os
import re
import subprocess

import pytest

import fluid


class FitALine(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=y_predict, label=y),
                                     name='avg_cost')
        fluid.optimizer.SGD(learning_rate=0.001).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


class MLP(fluid.Program):
    @fluid.network("image", "label")
    def train_step(self, image, label):
        image = fluid.layers.data(name='image', shape=[4], dtype='float32')
        label = fluid.layers.data(name='label', shape=[1], dtype='int64')
        hidden = fluid.layers.fc(input=image, size=8, act='relu')
        logits = fluid.layers.fc(input=hidden, size=3, act=None)
        loss = fluid.layers.mean(
            fluid.layers.softmax_with_cross_entropy(logits=logits, label=label), name='loss')
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


# ------------------------------------------------------------------------------------------

from golden import check_golden  # noqa: E402

from fluid_interactive import render  # noqa: E402
from fluid_interactive.ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, SourceLoc, VarDesc  # noqa: E402
from fluid_interactive.render import (  # noqa: E402
    DotError,
    dot_to_svg,
    has_dot,
    style,
)

block_to_dot = functools.partial(render.block_to_dot, detail="ops")
program_to_dot = functools.partial(render.program_to_dot, detail="ops")
split_to_dot = functools.partial(render.split_to_dot, detail="ops", stack=False)

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
ROOT = os.path.dirname(os.path.dirname(HERE))
needs_dot = pytest.mark.skipif(not has_dot(), reason="graphviz `dot` is not installed")


@pytest.fixture(scope="module")
def fit():
    return FitALine().Compile(seed=0).program


@pytest.fixture(scope="module")
def mlp():
    return MLP().Compile(seed=0).program


# --- a small DOT reader for the property checks ---------------------------------------------

_Q = r'"((?:[^"\\]|\\.)*)"'
_NODE = re.compile(r'^\s*' + _Q + r' \[(.*)\];$')
_EDGE = re.compile(r'^\s*' + _Q + r' -> ' + _Q + r'(?: \[(.*)\])?;$')
_ATTR = re.compile(r'(\w+)=(' + _Q + r'|[^,\]]+)')


def _unq(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


def _attrs(text: str) -> dict:
    out = {}
    for m in _ATTR.finditer(text):
        out[m.group(1)] = _unq(m.group(3)) if m.group(3) is not None else m.group(2)
    return out


_HTML_LABEL = re.compile(r"label=<(<table.*?</table>)>")


def _cells(table: str) -> list:
    return [html.unescape(re.sub(r"<[^>]*>", "", c))
            for c in re.findall(r"<td[^>]*>(.*?)</td>", table)]


def nodes(dot: str) -> dict:
    """node id -> attrs. For a var (an HTML-like table) ``label`` is its cells joined by '|',
    ``cells`` the list, and ``fillcolor``/``color``/``cellborder`` come from the table."""
    out = {}
    for line in dot.splitlines():
        m = _NODE.match(line)
        if not m or _EDGE.match(line):
            continue
        rest = m.group(2)
        table = _HTML_LABEL.search(rest)
        attrs = _attrs(_HTML_LABEL.sub("", rest))
        if table:
            attrs["cells"] = _cells(table.group(1))
            attrs["label"] = "|".join(attrs["cells"])
            head = re.match(r"<table([^>]*)>", table.group(1)).group(1)
            attrs.update(dict(re.findall(r'(\w+)="([^"]*)"', head)))
            attrs["fillcolor"] = attrs.pop("bgcolor", None)
            attrs["bold"] = "<b>" in table.group(1)
            fonts = re.findall(r'<font color="([^"]*)">', table.group(1))
            attrs["fontcolor"] = fonts[0] if fonts else None
        out[_unq(m.group(1))] = attrs
    return out


def legend_of(dot: str) -> str:
    """The drawing's label line (its title and legend), or '' when it has no legend."""
    line = next((x for x in dot.splitlines() if x.startswith("  label=")), "")
    return line if "<b>legend</b>" in line else ""


def edges(dot: str) -> dict:
    """(src, dst) -> attrs."""
    out = {}
    for line in dot.splitlines():
        m = _EDGE.match(line)
        if m:
            out[(_unq(m.group(1)), _unq(m.group(2)))] = _attrs(m.group(3) or "")
    return out


def clusters(dot: str) -> dict:
    """cluster name -> node ids declared directly or in nested clusters inside it."""
    out, stack = {}, []
    for line in dot.splitlines():
        m = re.match(r"^\s*subgraph (cluster_\w+) \{$", line)
        if m:
            stack.append(m.group(1))
            out[m.group(1)] = []
            continue
        if line.strip() == "}" and stack:
            stack.pop()
            continue
        n = _NODE.match(line)
        if n and not _EDGE.match(line):
            for c in stack:
                out[c].append(_unq(n.group(1)))
    return out


def cluster_labels(dot: str) -> dict:
    out, current = {}, None
    for line in dot.splitlines():
        m = re.match(r"^\s*subgraph (cluster_\w+) \{$", line)
        if m:
            current = m.group(1)
        elif current and line.strip().startswith("label="):
            out[current] = _unq(re.match(r'\s*label=' + _Q, line).group(1))
            current = None
    return out


# --- golden files ----------------------------------------------------------------------------

def _normalise(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _check_golden(name: str, text: str) -> None:
    check_golden(os.path.join(GOLDEN, name), text, "DOT", _normalise)


def test_golden_fit_a_line_program(fit):
    _check_golden("fit_a_line.dot", program_to_dot(fit))


def test_golden_fit_a_line_infer_block(fit):
    _check_golden("fit_a_line_infer.dot", block_to_dot(fit, "infer"))


def test_golden_mlp_program(mlp):
    _check_golden("mlp.dot", program_to_dot(mlp))


def test_golden_mlp_collapsed(mlp):
    _check_golden("mlp_collapsed.dot", program_to_dot(mlp, collapse_grads=True))


def test_golden_files_hold_no_paths_or_run_specific_text():
    for name in sorted(os.listdir(GOLDEN)):
        with open(os.path.join(GOLDEN, name), encoding="utf-8") as f:
            text = f.read()
        assert ROOT not in text and "/tmp" not in text and "0x" not in text, name


def test_golden_whitespace_tolerance():
    assert _normalise('a  [x="1"];\n\n   b;\n') == _normalise('a [x="1"];\nb;')


# --- determinism -------------------------------------------------------------------------------

def test_same_program_gives_identical_text(fit):
    again = FitALine().Compile(seed=0).program
    for kw in ({}, {"forward_only": True}, {"collapse_grads": True}, {"show_global": False}):
        assert program_to_dot(fit, **kw) == program_to_dot(again, **kw)
    assert program_to_dot(fit) == program_to_dot(fit.clone())


def test_accepts_a_compiled_program_and_rejects_other_things(fit):
    compiled = FitALine().Compile(seed=0)
    assert program_to_dot(compiled) == program_to_dot(fit)
    with pytest.raises(TypeError, match="Compile"):
        program_to_dot(FitALine())


# --- every op and var, roles, clusters, tooltips --------------------------------------------

def test_every_op_and_var_appears_with_its_edges(fit, mlp):
    for prog in (fit, mlp):
        dot = program_to_dot(prog)
        ns, es = nodes(dot), edges(dot)
        for block in prog.blocks:
            for name in block.vars:
                node = ns[f"v{block.idx}:{name}"]
                assert node["label"].startswith(name + "|")
            for i, op in enumerate(block.ops):
                op_id = f"op{block.idx}.{i}"
                assert ns[op_id]["label"] == op.type
                assert ns[op_id]["shape"] == "ellipse"
                for n in op.input_names():
                    owner = 0 if n in prog.blocks[0].vars else block.idx
                    assert (f"v{owner}:{n}", op_id) in es
                for n in op.output_names():
                    owner = 0 if n in prog.blocks[0].vars else block.idx
                    assert (op_id, f"v{owner}:{n}") in es


def test_variables_are_records_with_name_short_type_and_tag(fit):
    ns = nodes(program_to_dot(fit))
    w = ns["v0:prediction/fc_0.w_0"]
    assert w["shape"] == "none"
    assert w["cells"] == ["prediction/fc_0.w_0", "f32[13,1]", "param"]
    assert w["bold"] and w["cellborder"] == "2"
    assert w["fillcolor"] == style.VAR_STYLES["param"].fill
    lr = ns["v0:learning_rate_0"]
    assert lr["label"] == "learning_rate_0|f32[1]|state" and lr["cellborder"] == "2"
    assert lr["fillcolor"] == style.VAR_STYLES["state"].fill
    assert ns["v1:prediction/fc_0.tmp_0"]["cellborder"] == "1"
    assert not ns["v1:prediction/fc_0.tmp_0"]["bold"]
    assert ns["v1:x"]["label"] == "x|f32[?,13]|data"
    assert ns["v1:avg_cost"]["label"] == "avg_cost|f32[]"
    assert ns["v1:prediction/fc_0.w_0@GRAD"]["fontcolor"] == style.VAR_STYLES["grad"].fontcolor


def test_ops_are_coloured_by_role(fit):
    dot = program_to_dot(fit)
    ns = nodes(dot)
    block = fit.block("train_step")
    for i, op in enumerate(block.ops):
        node = ns[f"op1.{i}"]
        kind = style.op_kind(op, lambda n: fit.find_var(block, n))
        assert node["fillcolor"] == style.OP_STYLES[kind].fill
        if op.role & OpRole.LOSS:
            assert node["color"] == style.LOSS_BORDER and node["peripheries"] == "2"
        else:
            assert node["color"] == style.OP_STYLES[kind].border
    kinds = {style.op_kind(op, lambda n: fit.find_var(block, n)) for op in block.ops}
    assert kinds == {"forward", "backward", "optimize"}
    mean = ns[f"op1.{[op.type for op in block.ops].index('mean')}"]
    assert mean["color"] == style.LOSS_BORDER
    # the legend lists what is used, and only that
    legend = legend_of(dot)
    for word in ("forward op", "backward op", "optimize op", "loss op", "parameter [param]",
                 "other persistable state [state]", "fed data [data]", "gradient"):
        assert word in legend
    assert "RPC" not in legend and "reader" not in legend
    assert legend_of(program_to_dot(fit, legend=False)) == ""


def test_all_role_kinds_have_distinct_colours():
    fills = [s.fill for s in style.OP_STYLES.values()]
    assert len(set(fills)) == len(fills)


def _role_program() -> ProgramDesc:
    g = BlockDesc(0, vars={"w": VarDesc("w", (2,), persistable=True, is_parameter=True),
                           "lr": VarDesc("lr", (1,), persistable=True),
                           "reader": VarDesc("reader", (), persistable=True, kind="reader")})
    g.ops = [OpDesc("create_recordio_file_reader", outputs={"Out": ["reader"]})]
    b = BlockDesc(1, 0, "step", vars={"x": VarDesc("x", (-1, 2)), "g": VarDesc("g", (2,))})
    b.ops = [
        OpDesc("read", inputs={"Reader": ["reader"]}, outputs={"Out": ["x"]}),
        OpDesc("lr_decay", inputs={"X": ["lr"]}, outputs={"Out": ["lr"]}, role=OpRole.LRSCHED),
        OpDesc("send", inputs={"X": ["g"]}, role=OpRole.RPC),
        OpDesc("send_barrier", role=OpRole.DIST),
        OpDesc("recv", outputs={"Out": ["w"]}, role=OpRole.RPC),
        OpDesc("mystery", inputs={"X": ["x"]}, outputs={"Out": ["g"]},
               role=OpRole.NOT_SPECIFIED),
        OpDesc("sgd", inputs={"Param": ["w"], "Grad": ["g"], "LearningRate": ["lr"]},
               outputs={"ParamOut": ["w"]}, role=OpRole.OPTIMIZE | OpRole.LRSCHED),
    ]
    return ProgramDesc([g, b], name="roles")


def test_rpc_dist_lrsched_reader_and_unspecified_roles():
    prog = _role_program()
    dot = program_to_dot(prog)
    ns = nodes(dot)
    expect = {"op0.0": "reader", "op1.0": "reader", "op1.1": "lrsched", "op1.2": "rpc",
              "op1.3": "dist", "op1.4": "rpc", "op1.5": "unspecified", "op1.6": "lrsched"}
    for node_id, kind in expect.items():
        assert ns[node_id]["fillcolor"] == style.OP_STYLES[kind].fill, node_id
    assert ns["v0:reader"]["label"] == "reader|reader|state"
    legend = legend_of(dot)
    for word in ("reader op", "LR schedule op", "RPC (send/recv) op", "distributed op",
                 "role not set op"):
        assert word in legend
    # forward_only drops the LR schedule ops and keeps the RPC, dist and reader ones
    fwd = nodes(program_to_dot(prog, forward_only=True))
    assert "op1.1" not in fwd and "op1.6" not in fwd
    assert {"op1.0", "op1.2", "op1.3", "op1.4", "op1.5"} <= set(fwd)
    # collapse_grads folds the optimize op but never RPC or dist ones
    col = nodes(program_to_dot(prog, collapse_grads=True))
    assert col["optimize1"]["label"] == "optimize: 1 op"
    assert {"op1.2", "op1.3", "op1.4"} <= set(col)


def test_readers_and_gradients_are_told_by_the_ir_not_by_names():
    """A reader op is one that touches a var of reader kind, whatever its type (a program
    from elsewhere may hold reader ops no spec here knows); a gradient is what a
    Backward-role op writes or an op_role_var pair names, whatever its name."""
    g = BlockDesc(0, vars={
        "files": VarDesc("files", (), persistable=True, kind="reader"),
        "tensor": VarDesc("tensor", (2,), persistable=True),
        "w": VarDesc("w", (2,), persistable=True, is_parameter=True)})
    g.ops = [OpDesc("open_files", outputs={"Out": ["files"]}),                 # no spec here
             OpDesc("create_fake_reader_table", outputs={"Out": ["tensor"]})]  # not a reader
    b = BlockDesc(1, 0, "step", vars={
        "x": VarDesc("x", (-1, 2)), "dw": VarDesc("dw", (2,)),
        "x@GRAD": VarDesc("x@GRAD", (-1, 2)), "seen": VarDesc("seen", (2,))})
    b.ops = [OpDesc("double_buffer", inputs={"Reader": ["files"]}, outputs={"Out": ["x"]}),
             OpDesc("scale", inputs={"X": ["x"]}, outputs={"Out": ["x@GRAD"]}),
             OpDesc("deriv", inputs={"X": ["x@GRAD"]}, outputs={"Out": ["dw"]},
                    role=OpRole.BACKWARD),
             OpDesc("update", inputs={"Param": ["w"], "Grad": ["seen"]},
                    outputs={"ParamOut": ["w"]}, role=OpRole.OPTIMIZE, role_var=("w", "seen"))]
    prog = ProgramDesc([g, b], name="elsewhere")
    ns = nodes(program_to_dot(prog))
    reader, forward = style.OP_STYLES["reader"].fill, style.OP_STYLES["forward"].fill
    assert ns["op0.0"]["fillcolor"] == reader and ns["op1.0"]["fillcolor"] == reader
    assert ns["op0.1"]["fillcolor"] == forward
    grad = style.VAR_STYLES["grad"].fontcolor
    assert ns["v1:dw"]["fontcolor"] == grad and ns["v1:seen"]["fontcolor"] == grad
    assert ns["v1:x@GRAD"]["fontcolor"] is None        # a forward op's output
    from fluid_interactive.render.groups import group_ops
    assert [g.kind for g in group_ops(prog, b)] == ["reader", "forward", "backward", "optimize"]


def test_one_cluster_per_block_labelled_with_the_signature(fit):
    dot = program_to_dot(fit)
    cs, labels = clusters(dot), cluster_labels(dot)
    assert set(cs) == {"cluster_0", "cluster_1", "cluster_2"}
    assert labels["cluster_1"] == "block 1: train_step(x: f32[?,13], y: f32[?,1]) -> avg_cost"
    assert labels["cluster_2"] == "block 2: infer(x: f32[?,13]) -> prediction/fc_0.tmp_1"
    assert labels["cluster_0"].startswith("global (block 0)")
    assert "v0:prediction/fc_0.w_0" in cs["cluster_0"] and "op0.0" in cs["cluster_0"]
    assert "v1:x" in cs["cluster_1"] and "v2:x" in cs["cluster_2"]


def test_global_vars_are_drawn_once_with_edges_into_every_method(fit):
    dot = program_to_dot(fit)
    ns, es = nodes(dot), edges(dot)
    w_nodes = [n for n in ns if n.endswith(":prediction/fc_0.w_0")]
    assert w_nodes == ["v0:prediction/fc_0.w_0"]
    readers = {dst for (src, dst) in es if src == "v0:prediction/fc_0.w_0"}
    assert {"op1.0", "op2.0"} <= readers      # train_step's mul and infer's mul
    # the optimizer's write-back is drawn without pulling the layout upside down
    back = [a for (src, dst), a in es.items() if dst == "v0:prediction/fc_0.w_0"
            and src.startswith("op1.")]
    assert back and all(a["constraint"] == "false" and a["style"] == "dashed" for a in back)


def test_tooltips_carry_basename_and_line(fit):
    dot = program_to_dot(fit)
    ns = nodes(dot)
    for block in fit.blocks:
        for i, op in enumerate(block.ops):
            tip = ns[f"op{block.idx}.{i}"]["tooltip"]
            if op.loc is not None:
                assert tip == f"test_dot.py:{op.loc.line}"
            else:
                assert "no source line" in tip
    assert ROOT not in dot
    mul = fit.block("infer").ops[0]
    assert mul.loc is not None and ns["op2.0"]["tooltip"] == f"test_dot.py:{mul.loc.line}"


# --- options ------------------------------------------------------------------------------------

def test_forward_only_drops_backward_and_optimize_ops_and_their_vars(fit, mlp):
    for prog in (fit, mlp):
        dot = program_to_dot(prog, forward_only=True)
        ns = nodes(dot)
        block = prog.block("train_step")
        for i, op in enumerate(block.ops):
            present = f"op1.{i}" in ns
            assert present == (not op.role & (OpRole.BACKWARD | OpRole.OPTIMIZE)), op.type
        assert not any("@GRAD" in n for n in ns)
        assert "v0:learning_rate_0" not in ns          # only sgd reads it
        lr_init = [i for i, op in enumerate(prog.blocks[0].ops)
                   if op.output_names() == ["learning_rate_0"]]
        assert lr_init and not any(f"op0.{i}" in ns for i in lr_init)   # nor its initialiser
        fills = {a.get("fillcolor") for a in ns.values()}
        assert style.OP_STYLES["backward"].fill not in fills
        assert style.OP_STYLES["optimize"].fill not in fills
    ns = nodes(program_to_dot(fit, forward_only=True))
    assert "v0:prediction/fc_0.w_0" in ns and "v1:avg_cost" in ns


def test_collapse_grads_makes_one_node_per_kind(fit, mlp):
    for prog in (fit, mlp):
        dot = program_to_dot(prog, collapse_grads=True)
        ns, es = nodes(dot), edges(dot)
        block = prog.block("train_step")
        n_bwd = sum(1 for op in block.ops if op.role & OpRole.BACKWARD)
        n_opt = sum(1 for op in block.ops if op.role & OpRole.OPTIMIZE)
        summaries = [a["label"] for a in ns.values() if a.get("shape") == style.SUMMARY_SHAPE]
        assert summaries == [f"backward: {n_bwd} ops", f"optimize: {n_opt} ops"]
        assert not [i for i, op in enumerate(block.ops)
                    if op.role & (OpRole.BACKWARD | OpRole.OPTIMIZE) and f"op1.{i}" in ns]
        assert not any("@GRAD" in n for n in ns)
        params = [n for n, v in prog.blocks[0].vars.items() if v.is_parameter]
        for p in params:
            assert (f"v0:{p}", "optimize1") in es
            assert es[("optimize1", f"v0:{p}")]["constraint"] == "false"
            assert (f"v0:{p}", "backward1") in es
        assert ("v0:learning_rate_0", "optimize1") in es
        assert es[("backward1", "optimize1")]["label"] == f"{len(params)} grads"
        loss = block.returns
        assert (f"v1:{loss}", "backward1") in es
        # forward ops are untouched
        for i, op in enumerate(block.ops):
            if op.role & (OpRole.BACKWARD | OpRole.OPTIMIZE) == 0:
                assert ns[f"op1.{i}"]["label"] == op.type


def test_show_global_false_draws_global_vars_as_free_nodes(fit):
    dot = program_to_dot(fit, show_global=False)
    cs, ns = clusters(dot), nodes(dot)
    assert "cluster_0" not in cs
    assert "v0:prediction/fc_0.w_0" in ns
    assert not any(n.startswith("op0.") for n in ns)
    assert all("v0:prediction/fc_0.w_0" not in members for members in cs.values())


def test_methods_selects_blocks_and_the_global_vars_they_read(fit):
    dot = program_to_dot(fit, methods=["infer"])
    cs, ns = clusters(dot), nodes(dot)
    assert set(cs) == {"cluster_0", "cluster_2"}
    assert "v0:learning_rate_0" not in ns and "v0:prediction/fc_0.b_0" in ns
    assert program_to_dot(fit, methods="infer") == dot == program_to_dot(fit, methods=[2])
    assert block_to_dot(fit, "infer") == dot == block_to_dot(fit, fit.block("infer"))
    with pytest.raises(KeyError, match="train_step"):
        program_to_dot(fit, methods=["nope"])
    with pytest.raises(KeyError):
        block_to_dot(fit, 7)


def test_block_to_dot_of_the_global_block(fit):
    dot = block_to_dot(fit, 0, legend=False)
    assert set(clusters(dot)) == {"cluster_0"}
    ns = nodes(dot)
    assert set(ns) == {f"v0:{n}" for n in fit.blocks[0].vars} | {"op0.0", "op0.1", "op0.2"}


# --- escaping, sub-blocks, undeclared vars ------------------------------------------------------

ODD = ['a"b', "c\\d", "e{f}|g<h>", "w@GRAD", "x y", "end\\"]


def _odd_program() -> ProgramDesc:
    g = BlockDesc(0, vars={ODD[0]: VarDesc(ODD[0], (3,), persistable=True, is_parameter=True)})
    b = BlockDesc(1, 0, 'we"ird', feeds=[ODD[4]],
                  vars={n: VarDesc(n, (-1, 3)) for n in ODD[1:]})
    b.ops = [OpDesc("elementwise_add", inputs={"X": [ODD[4]], "Y": [ODD[0]]},
                    outputs={"Out": [ODD[2]]}, loc=SourceLoc("/abs/path/my \"nb\".py", 3)),
             OpDesc("scale", inputs={"X": [ODD[2]]}, outputs={"Out": [ODD[3], ODD[5]]}),
             OpDesc("relu", inputs={"X": ["ghost"]}, outputs={"Out": [ODD[1]]})]
    sub = BlockDesc(2, 1, vars={"inner": VarDesc("inner", (-1, 3))})
    sub.ops = [OpDesc("scale", inputs={"X": [ODD[2]]}, outputs={"Out": ["inner"]})]
    return ProgramDesc([g, b, sub], name="odd \"names\"")


def test_names_with_quotes_slashes_braces_and_at_are_escaped():
    prog = _odd_program()
    dot = program_to_dot(prog)
    ns = nodes(dot)
    for n in ODD[1:]:
        assert f"v1:{n}" in ns
    assert f"v0:{ODD[0]}" in ns
    # table cells escape HTML; ids and tooltips escape quotes and backslashes
    assert ns["v1:e{f}|g<h>"]["cells"] == ["e{f}|g<h>", "f32[?,3]"]
    assert "e{f}|g&lt;h&gt;" in dot
    assert ns['v0:a"b']["cells"] == ['a"b', "f32[3]", "param"]
    assert ns["v1:c\\d"]["cells"] == ["c\\d", "f32[?,3]"]
    assert ns["v1:x y"]["cells"] == ["x y", "f32[?,3]"]
    assert ns["v1:end\\"]["tooltip"] == "end\\: f32[?,3]"
    assert '"v1:end\\\\"' in dot                       # a trailing backslash is doubled
    assert ns["op1.0"]["tooltip"] == 'my "nb".py:3'   # basename only, quote escaped
    assert "/abs/path" not in dot


def test_sub_blocks_and_undeclared_vars():
    prog = _odd_program()
    dot = program_to_dot(prog)
    ns, es, cs = nodes(dot), edges(dot), clusters(dot)
    assert "cluster_2" in cs and cluster_labels(dot)["cluster_2"] == "block 2 (parent 1)"
    # the sub-block reads its parent's var through the parent's node
    assert ("v1:e{f}|g<h>", "op2.0") in es
    assert ns["v1:ghost"]["label"] == "ghost|?"
    assert ns["v1:ghost"]["fillcolor"] == style.VAR_STYLES["undeclared"].fill
    assert "not declared" in ns["v1:ghost"]["tooltip"]
    # selecting the parent method draws the sub-block too
    assert "cluster_2" in clusters(program_to_dot(prog, methods=['we"ird']))
    # selecting only the sub-block draws the parent's var inside it
    only = program_to_dot(prog, methods=[2])
    assert set(clusters(only)) == {"cluster_2"}
    assert "v2:e{f}|g<h>" in nodes(only)


@needs_dot
def test_odd_names_render_through_dot():
    svg = dot_to_svg(program_to_dot(_odd_program()))
    for text in ('a&quot;b', 'c\\d', 'e{f}|g&lt;h&gt;', 'w@GRAD', 'end\\', 'x y'):
        assert text in svg, text


# --- the trainer/pserver split ------------------------------------------------------------------

def _trainer() -> ProgramDesc:
    g = BlockDesc(0, vars={"w": VarDesc("w", (4, 2), persistable=True, is_parameter=True)})
    b = BlockDesc(1, 0, "train_step", feeds=["x"], returns="loss",
                  vars={"x": VarDesc("x", (-1, 4), is_data=True), "h": VarDesc("h", (-1, 2)),
                        "loss": VarDesc("loss", ()), "w@GRAD": VarDesc("w@GRAD", (4, 2))})
    b.ops = [OpDesc("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["h"]}),
             OpDesc("mean", {"X": ["h"]}, {"Out": ["loss"]}, role=OpRole.LOSS),
             OpDesc("mul_grad", {"X": ["x"], "Y": ["w"]}, {"Y@GRAD": ["w@GRAD"]},
                    role=OpRole.BACKWARD, role_var=("w", "w@GRAD")),
             OpDesc("send", {"X": ["w@GRAD"]}, {}, role=OpRole.RPC),
             OpDesc("recv", {}, {"Out": ["w"]}, role=OpRole.RPC)]
    return ProgramDesc([g, b], name="trainer")


def _pserver() -> ProgramDesc:
    g = BlockDesc(0, vars={"w": VarDesc("w", (4, 2), persistable=True, is_parameter=True),
                           "w@GRAD": VarDesc("w@GRAD", (4, 2)),
                           "lr": VarDesc("lr", (1,), persistable=True)})
    g.ops = [OpDesc("listen_and_serv", {"X": ["w@GRAD"]}, {}, role=OpRole.RPC)]
    opt = BlockDesc(1, 0, "optimize_w")
    opt.ops = [OpDesc("sgd", {"Param": ["w"], "Grad": ["w@GRAD"], "LearningRate": ["lr"]},
                      {"ParamOut": ["w"]}, role=OpRole.OPTIMIZE, role_var=("w", "w@GRAD"))]
    return ProgramDesc([g, opt], name="pserver")


SPLIT_EDGES = [("trainer", "w@GRAD", "pserver.0", "w@GRAD", "send"),
               ("pserver.0", "w", "trainer", "w")]


def test_split_draws_programs_side_by_side_with_labelled_edges():
    dot = split_to_dot({"trainer": _trainer(), "pserver.0": _pserver()}, SPLIT_EDGES)
    cs, es = clusters(dot), edges(dot)
    labels = cluster_labels(dot)
    assert labels["cluster_p0"] == "trainer" and labels["cluster_p1"] == "pserver.0"
    assert {"cluster_p0_0", "cluster_p0_1", "cluster_p1_0", "cluster_p1_1"} <= set(cs)
    assert "p0.v1:w@GRAD" in cs["cluster_p0_1"] and "p1.v0:w@GRAD" in cs["cluster_p1"]
    send = es[("p0.v1:w@GRAD", "p1.v0:w@GRAD")]
    assert send["label"] == "send" and send["constraint"] == "false"
    assert es[("p1.v0:w", "p0.v0:w")]["label"] == "w"
    assert "edge between programs" in dot
    assert split_to_dot({"trainer": _trainer(), "pserver.0": _pserver()}, SPLIT_EDGES) == dot
    _check_golden("split.dot", dot)


def test_split_edge_ends_survive_filters_and_bad_edges_are_reported():
    dot = split_to_dot({"t": _trainer(), "p": _pserver()},
                       [("t", "w@GRAD", "p", "w@GRAD")], forward_only=True)
    assert ("p0.v1:w@GRAD", "p1.v0:w@GRAD") in edges(dot)   # kept although mul_grad is dropped
    assert "p0.op1.2" not in nodes(dot)
    with pytest.raises(KeyError, match="programs are"):
        split_to_dot({"t": _trainer()}, [("t", "w", "nowhere", "w")])
    with pytest.raises(KeyError, match="no variable 'zzz'"):
        split_to_dot({"t": _trainer()}, [("t", "zzz", "t", "w")])
    with pytest.raises(ValueError, match="from_program"):
        split_to_dot({"t": _trainer()}, [("t", "w")])


def test_split_collapsed_keeps_rpc_ops_and_the_sent_grads():
    dot = split_to_dot({"t": _trainer(), "p": _pserver()}, [], collapse_grads=True)
    ns, es = nodes(dot), edges(dot)
    assert ns["p0.backward1"]["label"] == "backward: 1 op"
    assert ("p0.backward1", "p0.v1:w@GRAD") in es and ("p0.v1:w@GRAD", "p0.op1.3") in es


# --- SVG ------------------------------------------------------------------------------------------

@needs_dot
def test_dot_to_svg_renders_programs(fit, mlp):
    assert has_dot()
    for dot in (program_to_dot(fit), program_to_dot(mlp, collapse_grads=True),
                block_to_dot(fit, "infer"), program_to_dot(fit, show_global=False),
                split_to_dot({"trainer": _trainer(), "pserver.0": _pserver()}, SPLIT_EDGES)):
        svg = dot_to_svg(dot)
        assert svg is not None and "<svg" in svg and "</svg>" in svg
    svg = dot_to_svg(program_to_dot(fit))
    assert "train_step(x: f32[?,13], y: f32[?,1]) &#45;&gt; avg_cost" in svg
    assert "test_dot.py:" in svg                        # tooltips became link titles


@needs_dot
def test_dot_errors_carry_dots_message():
    with pytest.raises(DotError, match="syntax error"):
        dot_to_svg("digraph { a -> ; }")


def test_without_dot_svg_is_none(monkeypatch):
    monkeypatch.setattr("fluid_interactive.render.svg.shutil.which", lambda name: None)
    assert has_dot() is False
    assert dot_to_svg("digraph { a }") is None


def test_dot_timeout_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("fluid_interactive.render.svg.shutil.which", lambda name: "/usr/bin/dot")

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))
    monkeypatch.setattr("fluid_interactive.render.svg.subprocess.run", slow)
    with pytest.raises(DotError, match="did not finish within 0.5 s"):
        dot_to_svg("digraph { a }", timeout=0.5)


# --- layering ------------------------------------------------------------------------------

def test_render_imports_only_ir_and_the_standard_library():
    folder = os.path.dirname(render.__file__)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    assert not node.module.startswith("fluid"), (name, node.module)
                elif node.level == 2:
                    assert (node.module or "").split(".")[0] == "ir", (name, node.module)
                else:
                    assert node.level == 1, (name, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("fluid"), (name, alias.name)
