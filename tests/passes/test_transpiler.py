"""The distribute transpiler as a pure pass: structure of the trainer and pserver programs,
slicing, placement, purity and errors. Every produced program passes `check_program`."""
import json
import os
import subprocess
import sys
import warnings
import zlib

import pytest
from distributed.nets import MLP, FedRate, FitALine, TwoHeads, with_lr_schedule
from frontend.test_gan import GAN

import fluid
from fluid_interactive.errors import OpArgumentError, ProgramDefinitionError
from fluid_interactive.ir import program_from_json, program_to_json
from fluid_interactive.ir.records import OpDesc, OpRole, VarDesc
from fluid_interactive.ir.text import format_program
from fluid_interactive.ops.dist import COMM_VAR
from fluid_interactive.passes.transpiler import slice_rows, stable_hash, transpile
from fluid_interactive.passes.verify import check_program

EP0, EP1 = "127.0.0.1:6174", "127.0.0.1:6175"
W, B = "prediction/fc_0.w_0", "prediction/fc_0.b_0"
WG, BG = W + "@GRAD", B + "@GRAD"


@pytest.fixture(scope="module")
def fit():
    return FitALine().Compile(seed=0)


def check_all(plan):
    for name, prog in plan.programs().items():
        check_program(prog)
        assert format_program(prog)                 # prints in the canonical form
        assert program_from_json(program_to_json(prog)) == prog, name


def types(block):
    return [op.type for op in block.ops]


# --- fit_a_line over 2 trainers / 2 pservers ---------------------------------------------------

def test_fit_a_line_trainer_program(fit):
    plan = transpile(fit, trainers=2, pservers=2)
    check_all(plan)
    prog = plan.trainer_program(0)
    block = prog.block("train_step")
    assert types(block) == [
        "mul", "elementwise_add", "elementwise_sub", "square", "mean", "fill_constant",
        "mean_grad", "square_grad", "elementwise_sub_grad", "elementwise_add_grad", "send",
        "mul_grad", "send", "send_barrier", "recv", "recv", "fetch_barrier"]
    assert not any(op.role & (OpRole.OPTIMIZE | OpRole.LRSCHED) for op in block.ops)
    rpc = [op for op in block.ops if op.role == OpRole.RPC]
    assert [op.type for op in rpc] == ["send", "send", "send_barrier", "recv", "recv",
                                       "fetch_barrier"]
    send_b, send_w, barrier, recv_b, recv_w, fetch = rpc
    # b sorts before w, so round robin gives b to the first server.
    assert send_b.role_var == (B, BG) and send_w.role_var == (W, WG)
    assert recv_b.role_var == (B, BG) and recv_w.role_var == (W, WG)
    assert send_b.inputs["X"] == [BG] and send_b.attrs["epmap"] == [EP0]
    assert send_w.inputs["X"] == [WG] and send_w.attrs["epmap"] == [EP1]
    assert send_b.attrs["send_varnames"] == [BG + ".trainer_0"]
    assert recv_b.outputs["Out"] == [B] and recv_w.outputs["Out"] == [W]
    assert recv_w.attrs["epmap"] == send_w.attrs["epmap"]
    assert barrier.attrs["endpoints"] == [EP0, EP1] == fetch.attrs["endpoints"]
    # each send right after the op computing its gradient
    ops = block.ops
    assert ops[ops.index(send_b) - 1].outputs["Y@GRAD"] == [BG]
    assert WG in ops[ops.index(send_w) - 1].output_names()
    # optimizer state moved to the servers; the communicator arrived
    g0 = prog.global_block()
    assert sorted(g0.vars) == sorted([W, B, COMM_VAR])
    assert g0.vars[COMM_VAR].kind == "communicator" and g0.vars[COMM_VAR].persistable
    assert [op.type for op in g0.ops] == ["uniform_random", "fill_constant"]
    assert block.is_test is False
    # the other method is untouched
    assert types(prog.block("infer")) == types(fit.program.block("infer"))


def test_trainers_differ_only_in_their_id(fit):
    plan = transpile(fit, trainers=2, pservers=2)
    t0, t1 = plan.trainer_program(0), plan.trainer_program(1)
    for a, b in zip(t0.block("train_step").ops, t1.block("train_step").ops):
        assert (a.type, a.inputs, a.outputs, a.role, a.role_var) == \
            (b.type, b.inputs, b.outputs, b.role, b.role_var)
        if a.role == OpRole.RPC:
            assert a.attrs["trainer_id"] == 0 and b.attrs["trainer_id"] == 1
    send1 = next(op for op in t1.block("train_step").ops if op.type == "send")
    assert send1.attrs["send_varnames"] == [BG + ".trainer_1"]


def test_fit_a_line_pserver_programs(fit):
    plan = transpile(fit, trainers=2, pservers=2)
    assert plan.endpoints == [EP0, EP1]
    p0, p1 = plan.pserver_program(0), plan.pserver_program(EP1)
    assert sorted(p0.global_block().vars) == sorted([B, "learning_rate_0"])
    assert sorted(p1.global_block().vars) == sorted([W, "learning_rate_0"])
    assert p0.global_block().vars[B].is_parameter
    assert not p0.global_block().ops
    (opt,) = p0.blocks[1:]
    assert opt.parent_idx == 0
    assert opt.feeds == [BG + ".trainer_0", BG + ".trainer_1"]
    assert types(opt) == ["sum", "scale", "sgd"]
    assert all(op.role == OpRole.OPTIMIZE and op.role_var == (B, BG) for op in opt.ops)
    assert opt.ops[1].attrs["scale"] == 0.5 and opt.ops[1].outputs["Out"] == [BG]
    assert opt.ops[2].inputs == {"Param": [B], "Grad": [BG], "LearningRate": ["learning_rate_0"]}
    info = plan.pserver_info(1)
    assert [(b.param_block, b.grad_block) for b in info.optimize_blocks] == [(W, WG)]
    # startup: the original initialisers of what lives there
    s0, s1 = plan.startup_program(0), plan.startup_program(1)
    assert [op.outputs["Out"] for op in s0.global_block().ops] == [[B], ["learning_rate_0"]]
    assert [op.type for op in s1.global_block().ops] == ["uniform_random", "fill_constant"]
    assert s1.global_block().ops[0] == fit.program.global_block().ops[0]


def test_split_parameter_uses_split_and_concat(fit):
    plan = transpile(fit, trainers=2, pservers=2, min_block_size=4)
    check_all(plan)
    block = plan.trainer_program(0).block("train_step")
    dist_rpc = [op.type for op in block.ops if op.role in (OpRole.RPC, OpRole.DIST)]
    assert dist_rpc == ["send", "split", "send", "send_barrier", "recv", "recv",
                        "fetch_barrier", "concat"]
    split = next(op for op in block.ops if op.type == "split")
    concat = block.ops[-1]
    assert split.role == OpRole.DIST and split.role_var == (W, WG)
    assert split.attrs["sections"] == [7, 6]
    assert split.outputs["Out"] == [WG + ".block0", WG + ".block1"]
    assert concat.type == "concat" and concat.role == OpRole.DIST
    assert concat.inputs["X"] == [W + ".block0", W + ".block1"] and concat.outputs["Out"] == [W]
    # block 0 went to the second server (round robin after b), block 1 to the first
    assert plan.param_blocks(W)[0].endpoint == EP1 and plan.param_blocks(W)[1].endpoint == EP0
    s = plan.startup_program(EP0).global_block()
    sl = [op for op in s.ops if op.type == "slice"]
    assert len(sl) == 1 and sl[0].attrs == {"axes": [0], "starts": [7], "ends": [13]}
    assert not s.vars[W].persistable and s.vars[W + ".block1"].persistable


def test_summary_text_and_dot(fit):
    plan = transpile(fit, trainers=2, pservers=2, min_block_size=4)
    text = str(plan)
    assert "sync mode, 2 trainer(s), 2 parameter server(s)" in text
    assert EP0 in text and EP1 in text and "rows 7:13 of 13" in text
    assert "=== trainer 1 ===" in plan.text()
    dot = fluid.graph(plan).dot
    assert dot.startswith("digraph") and "trainer 0" in dot and f"pserver {EP1}" in dot
    edges = plan.edges()
    assert ("trainer 0", WG + ".block0", f"pserver {EP1}", WG + ".block0.trainer_0") in edges
    assert (f"pserver {EP1}", W + ".block0", "trainer 0", W + ".block0") in edges


# --- slicing and placement -----------------------------------------------------------------------

def test_slice_rows_follows_paddle():
    assert slice_rows((784, 200), 2, 8192) == [392, 392]      # the notes' example
    assert slice_rows((13, 1), 2, 8192) == [13]               # fit_a_line is never split
    assert slice_rows((1,), 4, 8192) == [1]
    assert slice_rows((13, 16), 3, 16) == [5, 5, 3]
    assert slice_rows((100,), 3, 10) == [34, 34, 32]
    assert slice_rows((100,), 3, 50) == [50, 50]              # 2 parts of >= 50 at most
    assert slice_rows((4, 5), 8, 1) == [1, 1, 1, 1]           # never more parts than rows
    assert slice_rows((), 4, 1) == [1]


def test_adam_state_follows_its_parameter():
    compiled = MLP().Compile(seed=1)
    plan = transpile(compiled, trainers=2, pservers=2, min_block_size=16)
    check_all(plan)
    w = "mlp/fc_0.w_0"
    pieces = plan.param_blocks(w)
    assert [p.rows for p in pieces] == [7, 6]
    for key in ("moment1_0", "moment2_0"):
        loc = plan.locate(f"{w}_{key}")
        assert loc.kind == "rows"
        assert [(p.endpoint, p.rows) for p in loc.pieces] == \
            [(p.endpoint, p.rows) for p in pieces]
    for key in ("beta1_pow_acc_0", "beta2_pow_acc_0"):
        loc = plan.locate(f"{w}_{key}")
        assert loc.kind == "copy"           # replicated: one copy per parameter block
        assert [p.endpoint for p in loc.pieces] == [p.endpoint for p in pieces]
    for i, piece in enumerate(pieces):
        prog = plan.pserver_program(piece.endpoint)
        g0 = prog.global_block()
        assert g0.vars[f"{w}_moment1_0.block{i}"].shape == (piece.rows, 16)
        assert g0.vars[f"{w}_beta1_pow_acc_0.block{i}"].shape == (1,)
        blk = next(b for b in prog.blocks[1:] if b.name == f"optimize:{w}.block{i}")
        assert types(blk) == ["sum", "scale", "scale", "elementwise_add", "scale", "adam"]
        adam = blk.ops[-1]
        assert adam.inputs["Param"] == [f"{w}.block{i}"]
        assert adam.inputs["Moment1"] == [f"{w}_moment1_0.block{i}"]
        assert adam.inputs["Beta2Pow"] == [f"{w}_beta2_pow_acc_0.block{i}"]
    # the trainer keeps no optimizer state
    assert not [n for n in plan.trainer_program(0).global_block().vars
                if "moment" in n or "pow_acc" in n or n.startswith("learning_rate")]


@pytest.mark.parametrize("method", ["round_robin", "hash"])
def test_gradient_block_always_beside_its_parameter_block(method):
    plan = transpile(MLP().Compile(seed=1), trainers=3, pservers=3, split_method=method,
                     min_block_size=8)
    trainer = plan.trainer_program(0).block("train_step")
    sends = {op.role_var[0]: op.attrs["epmap"] for op in trainer.ops if op.type == "send"}
    recvs = {op.role_var[0]: op.attrs["epmap"] for op in trainer.ops if op.type == "recv"}
    assert sends == recvs
    for ep in plan.endpoints:
        info = plan.pserver_info(ep)
        g0 = plan.pserver_program(ep).global_block()
        for b in info.optimize_blocks:
            assert b.param_block in g0.vars
            assert b.grad_block.replace("@GRAD", "") == b.param_block
    if method == "hash":
        for p in plan.distributed_params():
            for piece in plan.param_blocks(p):
                assert piece.endpoint == plan.endpoints[
                    zlib.crc32(piece.name.encode()) % 3]


_PLACEMENT = """
import json, sys
sys.path[:0] = {paths!r}
import fluid_interactive.passes.transpiler as T
from distributed.nets import MLP
plan = T.transpile(MLP().Compile(seed=1), trainers=2, pservers=4, split_method="hash",
                   min_block_size=8)
print(json.dumps({{p: [[b.endpoint, b.name] for b in plan.param_blocks(p)]
                  for p in plan.distributed_params()}}))
"""


def test_hash_placement_is_the_same_in_every_process():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [root, os.path.join(root, "extension"), os.path.join(root, "tests")]
    code = _PLACEMENT.format(paths=paths)
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        outs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # some of the 4 servers may be idle
        here = transpile(MLP().Compile(seed=1), trainers=2, pservers=4, split_method="hash",
                         min_block_size=8)
    assert outs[0] == {p: [[b.endpoint, b.name] for b in here.param_blocks(p)]
                       for p in here.distributed_params()}
    assert stable_hash("a") == zlib.crc32(b"a")


def test_more_pservers_than_blocks_warns_and_leaves_some_idle(fit):
    with pytest.warns(UserWarning, match=r"2 of 4 parameter servers .* idle"):
        plan = transpile(fit, trainers=1, pservers=4)
    check_all(plan)
    assert plan.pserver_info(3).idle
    assert "(idle" in str(plan)


def test_endpoints_may_be_given(fit):
    plan = transpile(fit, trainers=2, pservers="10.0.0.1:7000, 10.0.0.2:7000")
    assert plan.endpoints == ["10.0.0.1:7000", "10.0.0.2:7000"]
    plan = transpile(fit, trainers=2, pservers=["a:1", "b:2"])
    assert plan.pserver_program("b:2").global_block().vars[W].is_parameter


# --- the other configurations -------------------------------------------------------------------

def _configs():
    yield "sgd_async", lambda: transpile(FitALine().Compile(seed=0), trainers=2, pservers=2,
                                         mode="async", min_block_size=4)
    yield "adam_hash", lambda: transpile(MLP().Compile(seed=0), trainers=3, pservers=2,
                                         split_method="hash", min_block_size=16)
    yield "momentum_l1", lambda: transpile(MLP(optimizer="momentum").Compile(seed=0),
                                           trainers=2, pservers=3, min_block_size=16)
    yield "no_slicing", lambda: transpile(MLP().Compile(seed=0), trainers=2, pservers=2,
                                          slice_var_up=False, min_block_size=1)
    yield "one_trainer", lambda: transpile(MLP().Compile(seed=0), trainers=1, pservers=2,
                                           min_block_size=16)
    yield "two_optimizers", lambda: transpile(TwoHeads().Compile(seed=0), trainers=2,
                                              pservers=2, min_block_size=4)
    yield "fed_rate", lambda: transpile(FedRate().Compile(seed=0), main="train", trainers=2,
                                        pservers=2, min_block_size=4)
    yield "gan", lambda: transpile(GAN().Compile(seed=0), main=("train_d", "train_g",
                                                                "train_d_real"),
                                   trainers=2, pservers=3, min_block_size=4)
    yield "lr_schedule", lambda: transpile(with_lr_schedule(FitALine().Compile(seed=0)),
                                           trainers=2, pservers=2, min_block_size=4)


@pytest.mark.parametrize("name,make", list(_configs()), ids=[n for n, _ in _configs()])
def test_every_program_verifies(name, make):
    plan = make()
    check_all(plan)
    for i in range(plan.trainers):
        block = plan.trainer_program(i).block(plan.main[0])
        assert not any(op.role & OpRole.OPTIMIZE for op in block.ops)
    for ep in plan.endpoints:
        for blk in plan.pserver_program(ep).blocks[1:]:
            assert blk.parent_idx == 0
            assert all(op.role & (OpRole.OPTIMIZE | OpRole.LRSCHED) for op in blk.ops)


def test_async_mode_has_no_barriers_or_averaging(fit):
    plan = transpile(fit, trainers=2, pservers=2, mode="async")
    block = plan.trainer_program(1).block("train_step")
    assert "send_barrier" not in types(block) and "fetch_barrier" not in types(block)
    send = next(op for op in block.ops if op.type == "send")
    assert send.attrs["send_varnames"] == [BG] and send.attrs["sync_mode"] is False
    opt = plan.pserver_program(0).blocks[1]
    assert opt.feeds == [BG] and types(opt) == ["sgd"]


def test_two_methods_get_distinct_gradient_names():
    plan = transpile(GAN().Compile(seed=0), main=("train_d", "train_d_real"), trainers=2,
                     pservers=2)
    check_all(plan)
    w = "discriminator/fc_0.w_0"
    grads = [b.grad_block for ep in plan.endpoints for b in plan.pserver_info(ep).optimize_blocks
             if b.param == w]
    assert sorted(grads) == [w + "@GRAD", w + "@GRAD@train_d_real"]
    send = next(op for op in plan.trainer_program(0).block("train_d_real").ops
                if op.type == "send" and op.role_var[0] == w)
    assert send.attrs["send_varnames"] == [w + "@GRAD@train_d_real.trainer_0"]
    # only the discriminator is updated by these methods; the generator stays on trainers
    assert not any(p.startswith("generator") for p in plan.distributed_params())


def test_fed_learning_rate_travels_with_the_gradient():
    plan = transpile(FedRate().Compile(seed=0), main="train", trainers=2, pservers=1)
    send = next(op for op in plan.trainer_program(1).block("train").ops if op.type == "send")
    assert send.inputs["X"][-1] == "lr"
    assert send.attrs["send_varnames"][-1] == "lr.trainer_1"
    opt = plan.pserver_program(0).blocks[1]
    assert opt.feeds[-2:] == ["lr.trainer_0", "lr.trainer_1"]
    update = opt.ops[-1]
    assert update.type == "momentum" and update.inputs["LearningRate"] == ["lr"]


def test_lr_schedule_ops_go_to_every_server():
    plan = transpile(with_lr_schedule(FitALine().Compile(seed=0)), trainers=2, pservers=2)
    for ep in plan.endpoints:
        prog = plan.pserver_program(ep)
        lr = prog.blocks[1]
        assert lr.name == "lr_schedule:train_step"
        assert all(op.role == OpRole.LRSCHED for op in lr.ops) and len(lr.ops) == 2
        assert plan.pserver_info(ep).lr_blocks == {"train_step": 1}
        assert prog.global_block().vars["lr_eff"].persistable
    trainer = plan.trainer_program(0)
    assert "learning_rate_0" not in trainer.global_block().vars
    assert "lr_eff" not in trainer.block("train_step").vars


# --- purity ------------------------------------------------------------------------------------

def test_transpile_never_changes_its_input():
    compiled = MLP().Compile(seed=0)
    before = program_to_json(compiled.program)
    plan = transpile(compiled, trainers=3, pservers=2, min_block_size=16)
    plan.programs()
    fluid.graph(plan)
    str(plan)
    assert program_to_json(compiled.program) == before
    # and the programs it hands out are copies
    prog = plan.trainer_program(0)
    prog.blocks[1].ops.clear()
    assert plan.trainer_program(0).blocks[1].ops
    desc = GAN().Compile(seed=0).program
    before = program_to_json(desc)
    transpile(desc, main=("train_d", "train_g"), trainers=2, pservers=2).programs()
    assert program_to_json(desc) == before


# --- errors ------------------------------------------------------------------------------------

def test_main_method_without_an_optimizer(fit):
    with pytest.raises(ProgramDefinitionError, match="'infer' has no optimizer"):
        transpile(fit, main="infer", trainers=2, pservers=2)


def test_unknown_main_method(fit):
    with pytest.raises(ProgramDefinitionError, match="no method 'train'.*train_step, infer"):
        transpile(fit, main="train")


def test_trainer_and_pserver_ids_out_of_range(fit):
    plan = transpile(fit, trainers=2, pservers=2)
    for bad in (2, -1, True, "0"):
        with pytest.raises(OpArgumentError, match="out of range: this plan has 2 trainer"):
            plan.trainer_program(bad)
    with pytest.raises(OpArgumentError, match="no parameter server"):
        plan.pserver_program(5)
    with pytest.raises(OpArgumentError, match="no parameter server"):
        plan.startup_program("1.2.3.4:5")


@pytest.mark.parametrize("kwargs,match", [
    ({"trainers": 0}, "trainers must be an integer >= 1"),
    ({"trainers": True}, "trainers must be"),
    ({"trainers": 1.5}, "trainers must be"),
    ({"pservers": 0}, "pservers must be at least 1"),
    ({"pservers": []}, "lists no endpoint"),
    ({"pservers": ["localhost"]}, "not of the form 'host:port'"),
    ({"pservers": ["a:1", "a:1"]}, "listed twice"),
    ({"mode": "lazy"}, "mode must be 'sync' or 'async'"),
    ({"split_method": "random"}, "split_method must be one of round_robin, hash"),
    ({"min_block_size": 0}, "min_block_size must be"),
    ({"slice_var_up": "yes"}, "slice_var_up must be"),
    ({"main": ()}, "main must name a method"),
    ({"main": ("train_step", "train_step")}, "twice"),
])
def test_bad_settings(fit, kwargs, match):
    with pytest.raises(OpArgumentError, match=match):
        transpile(fit, **kwargs)


def test_needs_a_compiled_program():
    with pytest.raises(ProgramDefinitionError, match=r"FitALine\(\)\.Compile"):
        transpile(FitALine())
    with pytest.raises(ProgramDefinitionError, match="compiled program or a ProgramDesc"):
        transpile(42)
    assert issubclass(ProgramDefinitionError, fluid.FluidError)


def test_update_reading_a_per_sample_value_is_rejected(fit):
    desc = fit.program.clone()
    block = desc.block("train_step")
    sgd = next(op for op in block.ops if op.type == "sgd")
    sgd.inputs["LearningRate"] = ["y"]        # a data var with a batch dimension
    with pytest.raises(ProgramDefinitionError, match="per-sample value"):
        transpile(desc, trainers=2, pservers=2)


def test_method_returning_an_update_result_is_rejected():
    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.data(name="y", shape=[1])
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=x, size=1), y))
            fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(0.1)).minimize(loss)
            return loss

    desc = Net().Compile(seed=0).program.clone()
    block = desc.block("train_step")
    reg = next(n for n in block.vars if n.endswith("@REG"))
    block.returns = reg
    with pytest.raises(ProgramDefinitionError, match="returns .*@REG"):
        transpile(desc, trainers=1, pservers=1)


def test_optimize_op_without_role_var_joins_the_update_it_feeds():
    compiled = MLP(optimizer="momentum").Compile(seed=0)     # L1 decay: sign, scale, add
    desc = compiled.program.clone()
    block = desc.block("train_step")
    sign = next(op for op in block.ops if op.type == "sign")
    param = sign.role_var[0]
    sign.role_var = ()
    plan = transpile(desc, trainers=2, pservers=2)
    check_all(plan)
    ep = plan.param_blocks(param)[0].endpoint
    blk = next(b for b in plan.pserver_program(ep).blocks[1:] if b.name == f"optimize:{param}")
    assert types(blk)[2:4] == ["sign", "scale"]
    # one that touches no update cannot be placed
    desc2 = compiled.program.clone()
    b2 = desc2.block("train_step")
    b2.vars["stray"] = VarDesc("stray", (1,), "float32")
    b2.ops.append(OpDesc("fill_constant", {}, {"Out": ["stray"]},
                         {"shape": [1], "dtype": "float32", "value": 1.0}, role=OpRole.OPTIMIZE))
    with pytest.raises(ProgramDefinitionError, match="cannot tell which parameter"):
        transpile(desc2, trainers=2, pservers=2)
