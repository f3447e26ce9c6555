"""The canonical text form (golden), the JSON round trip and the verifier."""
import copy
import math
import os

import numpy as np
import pytest

import fluid
from fluid import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from fluid_interactive.frontend.program import trace_program
from fluid_interactive.ir.records import SourceLoc
from fluid_interactive.ir.text import format_op

THIS_FILE = os.path.basename(__file__)


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


class Tiny(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name='x', shape=[3])
        y = fluid.layers.data(name='y', shape=[1])
        with fluid.var_scope('pred'):
            p = fluid.layers.fc(input=x, size=1, param_attr=fluid.initializer.Constant(0.5))  # L_fc
        loss = fluid.layers.mean(fluid.layers.square_error_cost(p, y), name='loss')  # L_loss
        fluid.optimizer.SGD(learning_rate=0.25).minimize(loss)  # L_sgd
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[3])
        with fluid.var_scope('pred'):
            p = fluid.layers.fc(input=x, size=1, act='relu')  # L_infer
        return {"p": p, "both": (p, x)}


GOLDEN_GLOBAL = """
block 0 (global state and its initialisers):
  param pred/fc_0.w_0:f32[3,1]
  param pred/fc_0.b_0:f32[1]
  state learning_rate_0:f32[1]
  pred/fc_0.w_0:f32[3,1] = fill_constant() {shape=[3,1], dtype='float32', value=0.5}   # {L_fc}
  pred/fc_0.b_0:f32[1] = fill_constant() {shape=[1], dtype='float32', value=0.0}   # {L_fc}
  learning_rate_0:f32[1] = fill_constant() {shape=[1], dtype='float32', value=0.25}   # {L_sgd}
"""

GOLDEN_TRAIN = """
block 1 train(x:f32[?,3], y:f32[?,1]) -> loss:
  pred/fc_0.tmp_0:f32[?,1] = mul(X=x, Y=pred/fc_0.w_0) {x_num_col_dims=1, y_num_col_dims=1}   # {L_fc}
  pred/fc_0.tmp_1:f32[?,1] = elementwise_add(X=pred/fc_0.tmp_0, Y=pred/fc_0.b_0) {axis=1}   # {L_fc}
  square_error_cost_0.tmp_0:f32[?,1] = elementwise_sub(X=pred/fc_0.tmp_1, Y=y)   # {L_loss}
  square_error_cost_0.tmp_1:f32[?,1] = square(X=square_error_cost_0.tmp_0)   # {L_loss}
  loss:f32[] = mean(X=square_error_cost_0.tmp_1) <forward+loss>   # {L_loss}
"""

GOLDEN_INFER = """
block 2 infer(x:f32[?,3]) -> {'p': pred/fc_0.tmp_2, 'both': (pred/fc_0.tmp_2, x)}:
  pred/fc_0.tmp_0:f32[?,1] = mul(X=x, Y=pred/fc_0.w_0) {x_num_col_dims=1, y_num_col_dims=1}   # {L_infer}
  pred/fc_0.tmp_1:f32[?,1] = elementwise_add(X=pred/fc_0.tmp_0, Y=pred/fc_0.b_0) {axis=1}   # {L_infer}
  pred/fc_0.tmp_2:f32[?,1] = relu(X=pred/fc_0.tmp_1)   # {L_infer}
"""


def _golden(text: str) -> list[str]:
    for marker in ("L_fc", "L_loss", "L_sgd", "L_infer"):
        text = text.replace("{" + marker + "}", f"{THIS_FILE}:{_line_of(marker)}")
    return _lines(text)


def _lines(text: str) -> list[str]:
    """Whitespace-tolerant, content-exact: runs of blanks collapse, empty lines drop."""
    return [" ".join(line.split()) for line in text.strip().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tiny():
    return Tiny().Compile(seed=0)


def test_golden_global_block_and_infer(tiny):
    text = _lines(str(tiny))
    blocks = "\n".join(text)
    assert text[:len(_golden(GOLDEN_GLOBAL))] == _golden(GOLDEN_GLOBAL)
    assert blocks.endswith("\n".join(_golden(GOLDEN_INFER)))
    assert _lines(repr(tiny.infer)) == _golden(GOLDEN_INFER)
    assert _lines(tiny.infer.text) == _golden(GOLDEN_INFER)


def test_golden_train_forward_part_and_backward_roles(tiny):
    text = _lines(tiny.train.text)
    forward = _golden(GOLDEN_TRAIN)
    assert text[:len(forward)] == forward
    rest = text[len(forward):]
    assert rest[0].startswith("loss@GRAD:f32[] = fill_constant() {shape=[], dtype='float32', "
                              "value=1.0} <backward+loss>")
    assert any("= mul_grad(X=x, Y=pred/fc_0.w_0, Out@GRAD=pred/fc_0.tmp_0@GRAD)" in line
               and "<backward; pred/fc_0.w_0, pred/fc_0.w_0@GRAD>" in line for line in rest)
    sgd = [line for line in rest if "= sgd(" in line]
    assert sgd == [
        f"pred/fc_0.b_0:f32[1] = sgd(Param=pred/fc_0.b_0, Grad=pred/fc_0.b_0@GRAD, "
        f"LearningRate=learning_rate_0) <optimize; pred/fc_0.b_0, pred/fc_0.b_0@GRAD> # "
        f"{THIS_FILE}:{_line_of('L_sgd')}",
        f"pred/fc_0.w_0:f32[3,1] = sgd(Param=pred/fc_0.w_0, Grad=pred/fc_0.w_0@GRAD, "
        f"LearningRate=learning_rate_0) <optimize; pred/fc_0.w_0, pred/fc_0.w_0@GRAD> # "
        f"{THIS_FILE}:{_line_of('L_sgd')}"]


def test_print_shows_every_block_in_order(tiny, capsys):
    print(tiny)
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("block ")]
    assert headers == ["block 0 (global state and its initialisers):",
                       "block 1 train(x:f32[?,3], y:f32[?,1]) -> loss:",
                       "block 2 infer(x:f32[?,3]) -> {'p': pred/fc_0.tmp_2, "
                       "'both': (pred/fc_0.tmp_2, x)}:"]


def test_format_op_of_multi_output_and_attr_kinds():
    op = OpDesc("split", {"X": ["a"]}, {"Out": ["b", "c"], "Mask": ["m"]},
                {"sections": [1, 2], "flag": True, "name": "n", "eps": 1e-05},
                OpRole.BACKWARD, ("w", "w@GRAD"), SourceLoc("/some/where/model.py", 12))
    assert format_op(op) == ("Out=b, Out=c, Mask=m = split(X=a) {sections=[1,2], flag=True, "
                             "name='n', eps=1e-05} <backward; w, w@GRAD>   # model.py:12")


# --- JSON -------------------------------------------------------------------------------------

def test_json_round_trip_is_lossless():
    program = trace_program(Tiny())
    text = fluid.program_to_json(program)
    back = fluid.program_from_json(text)
    assert back == program
    assert fluid.program_to_json(back) == text
    assert back.blocks[2].returns == {"p": "pred/fc_0.tmp_2", "both": ("pred/fc_0.tmp_2", "x")}


def test_json_keeps_tuples_lists_bools_and_special_floats():
    block = BlockDesc(0, -1, "", {"v": VarDesc("v", (2,), "int64", persistable=True)})
    block.ops.append(OpDesc("fill_constant", {}, {"Out": ["v"]},
                            {"shape": [2], "t": (1, (2, 3)), "b": False, "i": 3, "f": 3.0,
                             "inf": -math.inf, "nan": math.nan, "none": None, "s": "x"},
                            OpRole.FORWARD, (), SourceLoc("f.py", 1, "fn")))
    program = ProgramDesc([block], "special")
    back = fluid.program_from_json(fluid.program_to_json(program))
    attrs = back.blocks[0].ops[0].attrs
    assert attrs["t"] == (1, (2, 3)) and isinstance(attrs["t"][1], tuple)
    assert attrs["shape"] == [2] and isinstance(attrs["shape"], list)
    assert attrs["b"] is False and type(attrs["i"]) is int and type(attrs["f"]) is float
    assert attrs["inf"] == -math.inf and math.isnan(attrs["nan"]) and attrs["none"] is None
    assert back.blocks[0].ops[0].loc == SourceLoc("f.py", 1, "fn")
    assert back.blocks[0].vars == program.blocks[0].vars


def test_compiled_from_the_round_trip_gives_identical_results(rng):
    program = trace_program(Tiny())
    a = fluid.CompiledProgram(program, seed=11)
    b = fluid.CompiledProgram(fluid.program_from_json(fluid.program_to_json(program)), seed=11)
    x = rng.normal(size=(16, 3)).astype("float32")
    y = rng.normal(size=(16, 1)).astype("float32")
    assert [a.train(x, y) for _ in range(5)] == [b.train(x, y) for _ in range(5)]
    out_a, out_b = a.infer(x), b.infer(x)
    np.testing.assert_array_equal(out_a["p"], out_b["p"])
    for name, value in a.parameters().items():
        np.testing.assert_array_equal(value, b.parameters()[name])


@pytest.mark.parametrize("text, words", [
    ("[1", "does not parse"),
    ('{"format": "other"}', "not a fluid_interactive program"),
    ('{"format": "fluid_interactive.program", "version": 1, "blocks": [{"idx": 0}]}',
     "malformed"),
])
def test_json_that_is_not_a_program_is_a_verify_error(text, words):
    with pytest.raises(fluid.VerifyError, match=words) as info:
        fluid.program_from_json(text)
    assert isinstance(info.value, ValueError)


# --- the verifier -------------------------------------------------------------------------------

@pytest.fixture
def program():
    return trace_program(Tiny())


def _verify_error(program) -> str:
    with pytest.raises(fluid.VerifyError) as info:
        fluid.check_program(program)
    return str(info.value)


def test_traced_programs_verify(program):
    fluid.check_program(program)


def test_var_looks_through_enclosing_blocks_and_names_what_is_missing(program):
    infer = program.block("infer")
    assert program.var(infer, "pred/fc_0.w_0") is program.global_block().vars["pred/fc_0.w_0"]
    assert program.var(infer, "x") is infer.vars["x"]
    assert program.find_var(infer, "ghost") is None
    with pytest.raises(KeyError, match=r"'ghost' is declared neither in block 2 \(infer\)"):
        program.var(infer, "ghost")


def test_read_before_write(program):
    ops = program.block("train").ops
    ops[0], ops[1] = ops[1], ops[0]
    message = _verify_error(program)
    assert "op 0" in message and "reads 'pred/fc_0.tmp_0' before" in message
    assert ">>   0  pred/fc_0.tmp_1:f32[?,1] = elementwise_add(" in message
    assert "     1  pred/fc_0.tmp_0:f32[?,1] = mul(" in message      # the window


def test_undeclared_var(program):
    program.block("infer").ops[1].inputs["Y"] = ["nowhere"]
    message = _verify_error(program)
    assert "block 2 (infer), op 1" in message and "'nowhere'" in message
    assert ">>   1  " in message and "Y=nowhere" in message


def test_undeclared_output(program):
    program.block("infer").ops[0].outputs["Out"] = ["ghost"]
    assert "writes 'ghost', which is not declared" in _verify_error(program)


def test_bad_role(program):
    program.block("train").ops[2].role = 0x7
    message = _verify_error(program)
    assert "op 2" in message and "0x7" in message and ">>   2" in message


def test_odd_role_var(program):
    program.block("train").ops[2].role_var = ("pred/fc_0.w_0",)
    assert "pairs" in _verify_error(program)


def test_duplicate_temporary_write(program):
    ops = program.block("train").ops
    ops[3].outputs["Out"] = ["square_error_cost_0.tmp_0"]
    message = _verify_error(program)
    assert "op 3" in message and "a second time" in message
    assert ">>   3  square_error_cost_0.tmp_0:f32[?,1] = square(" in message


def test_bad_block_links_and_interface(program):
    broken = copy.deepcopy(program)
    broken.blocks[2].parent_idx = 5
    assert "parent" in _verify_error(broken)
    broken = copy.deepcopy(program)
    broken.blocks[1].feeds = ["x", "nope"]
    assert "'nope'" in _verify_error(broken)
    broken = copy.deepcopy(program)
    broken.blocks[2].returns = "ghost"
    assert "'ghost'" in _verify_error(broken)
    broken = copy.deepcopy(program)
    broken.blocks[1].vars["alias"] = broken.blocks[1].vars["x"]
    assert "'alias'" in _verify_error(broken)
