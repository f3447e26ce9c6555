"""What roles of one job must agree on (`fluid_interactive.distributed.agreement`), without
Ray: a server accepts a trainer whose plan differs only in source locations and data paths,
and refuses one whose plan differs, naming the ops, vars and settings that differ."""
import os
import types

import pytest
from distributed.nets import MLP, FitALine
from distributed.ray_support import ROOT

from fluid_interactive.distributed import (
    ParameterServer,
    PlanMismatch,
    fingerprint,
    pserver_spec,
    transpile,
)
from fluid_interactive.distributed.agreement import comparable
from fluid_interactive.ops.registry import get_spec


def _example_module(path, name):
    """examples/fit_a_line.py run from ``path``, as `runpy` and `python` do (its ops record
    that path)."""
    module = types.ModuleType(name)
    module.__file__ = path
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)
    return module


def _example_plan(module, data_path):
    compiled = module.FitALine(DEFAULT_READER_FILE_PATH=data_path, batch_size=256,
                               epochs=None, learning_rate=0.01).Compile(seed=0)
    return transpile(compiled, main="train_step", trainers=2, pservers=2)


def _locations(program):
    return {op.loc.file for b in program.blocks for op in b.ops if op.loc is not None}


def test_roles_agree_whatever_the_script_path_and_the_data_path(tmp_path, monkeypatch):
    """The README's job as its roles build it: `fluid run examples/fit_a_line.py` records a
    relative path, `python /abs/examples/fit_a_line.py` an absolute one, and each process
    writes its data to a fresh temporary directory."""
    monkeypatch.chdir(ROOT)
    relative = _example_module(os.path.join("examples", "fit_a_line.py"), "fit_relative")
    absolute = _example_module(os.path.join(ROOT, "examples", "fit_a_line.py"), "fit_absolute")
    server_plan = _example_plan(relative, str(tmp_path / "a" / "data.recordio"))
    trainer_plan = _example_plan(absolute, str(tmp_path / "b" / "data.recordio"))
    ep = server_plan.endpoints[0]
    # The plans differ in exactly what must not matter.
    assert _locations(server_plan.startup_program(ep)) == {"examples/fit_a_line.py"}
    assert _locations(trainer_plan.startup_program(ep)) == {
        os.path.join(ROOT, "examples", "fit_a_line.py")}
    readers = [[op.attrs["files"] for op in p.trainer_program(0).global_block().ops
                if "files" in op.attrs] for p in (server_plan, trainer_plan)]
    assert readers[0] != readers[1] and all(readers)
    for ep in server_plan.endpoints:
        assert fingerprint(server_plan, ep).digest == fingerprint(trainer_plan, ep).digest
        server = ParameterServer(pserver_spec(server_plan, ep))
        server.connect(1, fingerprint(trainer_plan, ep))
        assert server.status().connected == [1]


def test_the_fingerprint_leaves_out_locations_and_the_paths_an_op_spec_names():
    from distributed.fit_job import FitALine as FileFit
    program = FileFit(DEFAULT_READER_FILE_PATH="/data/x.recordio").Compile(seed=0).program
    (reader,) = [op for op in program.global_block().ops if "files" in op.attrs]
    assert get_spec(reader.type).path_attrs == ("files",)
    assert reader.loc is not None and reader.attrs["files"] == ["/data/x.recordio"]
    kept = comparable(program)
    (same,) = [op for op in kept.global_block().ops if op.type == reader.type]
    assert "files" not in same.attrs and same.loc is None
    assert {k: v for k, v in reader.attrs.items() if k != "files"} == same.attrs
    assert all(op.loc is None for b in kept.blocks for op in b.ops)
    assert reader.attrs["files"] == ["/data/x.recordio"]       # the input is untouched


def _refusal(server_plan, trainer_plan, endpoint=0):
    ep = server_plan.endpoints[endpoint]
    server = ParameterServer(pserver_spec(server_plan, ep))
    with pytest.raises(PlanMismatch) as caught:
        server.connect(1, fingerprint(trainer_plan, ep))
    assert server.status().refused == {1: str(caught.value)}
    assert server.status().connected == []
    return str(caught.value)


def test_a_server_refuses_a_trainer_whose_plan_differs_and_says_what_differs():
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=1)
    other_rate = transpile(FitALine(learning_rate=0.02).Compile(seed=0), trainers=2,
                           pservers=1)
    message = _refusal(plan, other_rate)
    assert message.startswith("pserver 0 (127.0.0.1:6174) refuses trainer 1: its plan differs")
    assert "var learning_rate_0: its initialiser's value changed from 0.02 to 0.01" in message
    assert "op fill_constant -> learning_rate_0: attr value: 0.02 -> 0.01" in message
    three = transpile(FitALine().Compile(seed=0), trainers=3, pservers=1)
    assert "the number of trainers: 3 for the trainer, 2 for the server" in _refusal(plan, three)


def test_a_refusal_names_the_update_ops_and_the_slicing_that_differ():
    adam = transpile(MLP().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    sgd = transpile(MLP(optimizer="sgd").Compile(seed=0), trainers=2, pservers=2,
                    min_block_size=4)
    message = _refusal(adam, sgd)
    assert "only in the trainer's: op sgd -> mlp/fc_0.b_0.block0" in message
    assert "op adam -> mlp/fc_0.b_0.block0" in message
    whole = transpile(MLP().Compile(seed=0), trainers=2, pservers=2)
    message = _refusal(adam, whole)
    assert "the parameter blocks: mlp/fc_0.b_0: mlp/fc_0.b_0 rows 0:16 on 127.0.0.1:6174" in \
        message
    assert len(message.splitlines()) <= 10         # the first differences, not all 80
