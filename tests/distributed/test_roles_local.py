"""Without Ray: the script run plainly and with --distributed in this process, `fluid run`'s
argument handling, a server restarting from its state directory, and reader sharding."""
import os
import subprocess
import sys

import numpy as np
import pytest
from distributed.nets import FitALine
from distributed.ray_support import JOB_SCRIPT, ROOT, assert_same, fit_reference, write_fit_data

import fluid
from fluid_interactive.distributed import ParameterServer, launch, pserver_spec, transpile
from fluid_interactive.distributed.cli import _launcher_options
from fluid_interactive.distributed.cli import main as cli_main
from fluid_interactive.distributed.roles import distribute_if_requested


def _run(args, tmp_path, **env):
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "extension")]))
    for var in ("TRAINING_ROLE", "FLUID_DISTRIBUTED", "RAY_ADDRESS"):
        full.pop(var, None)
    full.update({k: str(v) for k, v in env.items()})
    return subprocess.run([sys.executable] + args, env=full, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


def test_the_script_plainly_and_distributed_in_one_process(tmp_path):
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    plain = _run([JOB_SCRIPT], tmp_path, FIT_DATA=data, FIT_OUT=tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    assert "trained 80 steps" in plain.stdout            # 1280 samples, batches of 16
    split = _run([JOB_SCRIPT, "--distributed", "main=train_step"], tmp_path, FIT_DATA=data,
                 FIT_OUT=tmp_path / "split", PADDLE_TRAINERS_NUM=2)
    assert split.returncode == 0, split.stderr
    assert "trained 40 steps" in split.stdout            # 2 trainers, each its own shard
    expected, steps = fit_reference(data, trainers=2, pservers=1)
    assert steps == 40
    assert_same(fluid.load(str(tmp_path / "split")).parameters(), expected)
    by_env = _run([JOB_SCRIPT], tmp_path, FIT_DATA=data, FIT_OUT=tmp_path / "env",
                  PADDLE_TRAINERS_NUM=2, FLUID_DISTRIBUTED="main=train_step")
    assert "trained 40 steps" in by_env.stdout, by_env.stderr
    assert_same(fluid.load(str(tmp_path / "env")).parameters(), expected)


def test_compile_without_the_flag_is_untouched():
    compiled = FitALine().Compile(seed=0)
    assert distribute_if_requested(compiled, argv=["main.py"], environ={}) is compiled
    dist = distribute_if_requested(compiled, argv=["main.py", "--distributed", "main=train_step"],
                                   environ={"PADDLE_TRAINERS_NUM": "2"})
    with dist:
        assert dist.engine == "local" and len(dist.trainers) == 2


def test_fluid_run_arguments(tmp_path, capsys):
    assert _launcher_options(["main.py", "--trainers", "2", "--distributed", "main=x",
                              "--pservers=3"]) == ({"trainers": 2, "pservers": 3},
                                                   ["main.py", "--distributed", "main=x"])
    for bad in (["main.py", "--trainers", "0", "--pservers", "1"], ["main.py", "--trainers", "2"],
                ["main.py", "--pservers"]):
        with pytest.raises(ValueError):
            _launcher_options(bad)
    assert cli_main(["build"]) == 2
    assert cli_main(["run", str(tmp_path / "missing.py")]) == 2
    script = tmp_path / "hello.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    assert cli_main(["run", str(script), "a", "--b"]) == 3
    assert "args ['a', '--b']" in capsys.readouterr().out
    assert cli_main(["run", str(script), "--trainers", "2", "--pservers", "1"]) == 2
    assert "needs the script's --distributed option" in capsys.readouterr().err


def test_a_server_restarts_from_its_state_directory(tmp_path):
    """A server built again on the same directory holds the committed state and the
    prepared step, and answers a repeated exchange as the first one did."""
    plan = transpile(FitALine().Compile(seed=0), trainers=1, pservers=1)
    spec = pserver_spec(plan, plan.endpoints[0])
    server = ParameterServer(spec, seed=0, state_dir=str(tmp_path / "s"))
    names = plan.received("train_step")[plan.endpoints[0]]
    grads = {"prediction/fc_0.w_0@GRAD": np.ones((13, 1), np.float32),
             "prediction/fc_0.b_0@GRAD": np.ones((1,), np.float32)}
    assert set(grads) == {f for b in spec.info.optimize_blocks for f in b.feeds}
    first = server.exchange(0, 1, None, grads, names)
    second = server.exchange(0, 2, 1, grads, names)          # commits step 1, prepares 2
    again = ParameterServer(spec, seed=99, state_dir=str(tmp_path / "s"))
    assert again.restored and again.step == 1
    for a, b in zip(again.exchange(0, 2, 1, grads, names), second):
        np.testing.assert_array_equal(a, b)                  # the prepared step, not redone
    again.commit(2)
    assert [np.array_equal(a, b) for a, b in zip(again.get(names), second)] == [True, True]
    assert not any(np.array_equal(a, b) for a, b in zip(first, second))
    again.remove_state()
    assert not os.path.exists(tmp_path / "s")


def test_trainers_read_their_own_shard(tmp_path):
    data = write_fit_data(str(tmp_path / "fit.recordio"), n=64)
    from distributed.fit_job import FitALine as FileFit
    plan = transpile(FileFit(DEFAULT_READER_FILE_PATH=data).Compile(seed=0), trainers=2,
                     pservers=1)
    shards = [op.attrs for t in range(2) for op in plan.trainer_program(t).global_block().ops
              if op.attrs.get("files")]
    assert [(a["shard_index"], a["num_shards"]) for a in shards] == [(0, 2), (1, 2)]
    unsharded = transpile(FitALineAll(DEFAULT_READER_FILE_PATH=data).Compile(seed=0),
                          trainers=2, pservers=1)
    for t in range(2):
        (attrs,) = [op.attrs for op in unsharded.trainer_program(t).global_block().ops
                    if op.attrs.get("files")]
        assert attrs.get("num_shards", 1) == 1 and attrs["trainer_shard"] is False
    single = FileFit(DEFAULT_READER_FILE_PATH=data, batch_size=32).Compile(seed=0)
    with launch(plan) as dist:
        for _ in range(2):
            assert abs(dist.train_step() - single.train_step()) < 1e-5


from distributed.fit_job import FitALine as _FileFit  # noqa: E402


class FitALineAll(_FileFit):
    """fit_job's program with a reader every trainer reads whole."""

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(file=self.DEFAULT_READER_FILE_PATH, batch_size=16,
                                    shape=[[13], [1]], dtype=['float32', 'float32'],
                                    trainer_shard=False)
        x, y = reader.next_item()
        with fluid.var_scope('prediction'):
            pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss


def test_a_plain_script_ignores_stray_role_variables():
    """Without --distributed, Compile() reads no role variable, so a leftover or invalid
    TRAINING_ROLE in the environment cannot break a plain script."""
    compiled = object()
    env = {"TRAINING_ROLE": "NOT_A_ROLE", "PADDLE_TRAINERS_NUM": "zero"}
    assert distribute_if_requested(compiled, argv=["main.py"], environ=env) is compiled
    with pytest.raises(fluid.OpArgumentError, match="TRAINING_ROLE"):
        distribute_if_requested(compiled, argv=["main.py", "--distributed", "main=train_step"],
                                environ=env)


# --- arguments checked before anything starts ------------------------------------------------

def _one_line_usage_error(result):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_malformed_distributed_option_is_one_line_and_status_2(tmp_path):
    fluid_run = ["-m", "fluid_interactive.distributed", "run", JOB_SCRIPT]
    cases = [
        (fluid_run + ["--distributed", "main"], "main needs a value"),
        (fluid_run + ["--distributed", "mode=fast", "--trainers", "2", "--pservers", "1"],
         "mode='fast' is not one of sync, async"),
        ([JOB_SCRIPT, "--distributed", "trainers=x"], "trainers='x' is not a positive"),
        ([JOB_SCRIPT, "--distributed"], "it needs a value"),
    ]
    for args, problem in cases:
        line = _one_line_usage_error(_run(args, tmp_path, TRAINING_ROLE="TRAINER"))
        assert problem in line and "expected --distributed main=METHOD[+METHOD...]" in line


def test_more_roles_than_the_machine_can_start_are_refused_at_once(tmp_path):
    args = ["-m", "fluid_interactive.distributed", "run", JOB_SCRIPT, "--distributed",
            "main=train_step", "--trainers", "2", "--pservers", "100"]
    line = _one_line_usage_error(_run(args, tmp_path))
    assert line.startswith("fluid run: 102 role processes (--trainers 2, --pservers 100) are "
                           "more than this machine can start: at most ")
    assert "FLUID_MAX_ROLES=N overrides" in line
    assert "at most 3 (FLUID_MAX_ROLES=3" in _one_line_usage_error(
        _run(args[:-1] + ["2"], tmp_path, FLUID_MAX_ROLES=3))


def test_exit_statuses_of_roles_killed_by_a_signal_are_128_plus_the_signal():
    from fluid_interactive.distributed.stopping import describe_exit, exit_status
    assert [exit_status(c) for c in (0, 1, -9, -15)] == [0, 1, 137, 143]
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"


def test_a_method_the_program_lacks_is_refused_before_anything_starts(tmp_path):
    """The launcher runs the script once to check the split: no cluster, no role."""
    args = ["-m", "fluid_interactive.distributed", "run", JOB_SCRIPT, "--distributed",
            "main=nosuch", "--trainers", "2", "--pservers", "2"]
    line = _one_line_usage_error(_run(args, tmp_path))
    assert line.startswith("fluid run: the program cannot be split: ProgramDefinitionError: ")
    assert "no method 'nosuch'; its methods are: train_step" in line


def test_a_script_that_never_compiles_is_refused_before_anything_starts(tmp_path):
    script = tmp_path / "idle.py"
    script.write_text("print('nothing to train')\n")
    args = ["-m", "fluid_interactive.distributed", "run", str(script), "--distributed",
            "main=train_step", "--trainers", "1", "--pservers", "1"]
    line = _one_line_usage_error(_run(args, tmp_path))
    assert line == (f"fluid run: {script} ended without compiling a fluid.Program: a job "
                    f"needs the script to call Compile()")
