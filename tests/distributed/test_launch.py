"""Launch settings (environment and ``--distributed``) and the layering of the new code."""
import ast
import os

import pytest
from distributed.nets import FitALine

from fluid_interactive.distributed import (
    RoleConfig,
    launch,
    parse_distributed_arg,
    role_from_env,
    transpile,
)
from fluid_interactive.errors import OpArgumentError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_parse_distributed_arg():
    assert parse_distributed_arg(["main.py"]) == {}
    assert parse_distributed_arg(["--distributed", "main=train_step"]) == {"main": "train_step"}
    assert parse_distributed_arg(["--distributed=main=d_step+g_step,mode=async,trainers=4,"
                                  "pservers=2,slice_var_up=false,min_block_size=64"]) == {
        "main": ("d_step", "g_step"), "mode": "async", "trainers": 4, "pservers": 2,
        "slice_var_up": False, "min_block_size": 64}
    for bad in (["--distributed"], ["--distributed", "main"], ["--distributed", "speed=3"],
                ["--distributed", "trainers=x"]):
        with pytest.raises(OpArgumentError):
            parse_distributed_arg(bad)


def test_role_from_env():
    assert role_from_env({}) == RoleConfig()
    env = {"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": "1", "PADDLE_TRAINERS_NUM": "2",
           "PADDLE_PSERVERS_IP_PORT_LIST": "10.0.0.1:6174,10.0.0.2:6174"}
    cfg = role_from_env(env, ["main.py", "--distributed", "main=train_step"])
    assert (cfg.role, cfg.trainer_id, cfg.trainers) == ("TRAINER", 1, 2)
    assert cfg.pservers == ("10.0.0.1:6174", "10.0.0.2:6174")
    assert cfg.transpile_kwargs() == {"main": "train_step", "trainers": 2,
                                      "pservers": ["10.0.0.1:6174", "10.0.0.2:6174"]}
    ps = role_from_env(dict(env, TRAINING_ROLE="PSERVER", POD_IP="10.0.0.2", PADDLE_PORT="6174"))
    assert ps.role == "PSERVER" and ps.current_endpoint == "10.0.0.2:6174"
    with pytest.raises(OpArgumentError, match="not in PADDLE_PSERVERS_IP_PORT_LIST"):
        role_from_env(dict(env, TRAINING_ROLE="PSERVER", PADDLE_CURRENT_ENDPOINT="x:1"))
    with pytest.raises(OpArgumentError, match="out of range"):
        role_from_env(dict(env, PADDLE_TRAINER_ID="2"))
    with pytest.raises(OpArgumentError, match="TRAINING_ROLE"):
        role_from_env({"TRAINING_ROLE": "BOSS"})
    with pytest.raises(OpArgumentError, match="not an integer"):
        role_from_env({"PADDLE_TRAINERS_NUM": "two"})


def test_settings_from_the_environment_transpile_and_launch():
    cfg = role_from_env({"PADDLE_TRAINERS_NUM": "2",
                         "PADDLE_PSERVERS_IP_PORT_LIST": "127.0.0.1:7001,127.0.0.1:7002"},
                        ["--distributed", "main=train_step"])
    plan = transpile(FitALine().Compile(seed=0), **cfg.transpile_kwargs())
    assert plan.endpoints == ["127.0.0.1:7001", "127.0.0.1:7002"] and plan.trainers == 2
    with launch(plan) as dist:
        assert dist.plan is plan


def _imports(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield "." * node.level + (node.module or "")
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name


@pytest.mark.parametrize("package,forbidden", [
    ("fluid_interactive/passes/transpiler", ("runtime", "frontend", "distributed", "backend",
                                             "render")),
    ("fluid_interactive/distributed", ("frontend", "render", "extension", "fluid")),
])
def test_layering(package, forbidden):
    """passes import ir and ops only (drawing a plan is fluid.graph's business); distributed
    imports runtime and passes."""
    for name in os.listdir(os.path.join(ROOT, package)):
        if not name.endswith(".py"):
            continue
        for mod in _imports(os.path.join(ROOT, package, name)):
            parts = mod.lstrip(".").split(".")
            assert not any(p in forbidden for p in parts), f"{package}/{name} imports {mod}"
    ops_dist = os.path.join(ROOT, "fluid_interactive", "ops", "dist.py")
    assert all(m in (".registry", ".spec", "__future__") for m in _imports(ops_dist))
