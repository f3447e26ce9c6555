"""History and rewind: a compiled program takes back its last n changes (calls, set_var,
reset_readers, recompilations) to bit-identical state, readers included, within a bounded
memory budget; with history off (the default outside a notebook) the call path has no
history code at all."""
import gc
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

import fluid
from fluid_interactive.runtime.live.history import (
    ARRAY_OVERHEAD,
    CHANGE_OVERHEAD,
    DEFAULT_CALLS,
    DEFAULT_MEMORY,
)


class Net(fluid.Program):
    learning_rate = 0.05
    hidden = 8

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("net"):
            h = fluid.layers.fc(input=x, size=self.hidden, act="tanh")
            p = fluid.layers.fc(input=h, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=p, label=y), name="cost")
        fluid.optimizer.Adam(learning_rate=self.learning_rate).minimize(cost)
        return cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        with fluid.var_scope("net"):
            h = fluid.layers.fc(input=x, size=self.hidden, act="tanh")
            return fluid.layers.fc(input=h, size=1)


@pytest.fixture
def data(rng):
    x = rng.standard_normal((32, 4)).astype(np.float32)
    return x, (x @ np.array([[1.0], [-1.0], [0.5], [2.0]], np.float32)).astype(np.float32)


def call_cost(prog):
    """What the history counts for one call of train_step: the arrays it replaces (data
    and object) and the record."""
    return CHANGE_OVERHEAD + sum(prog.get_var(n).nbytes + ARRAY_OVERHEAD
                                 for n in prog.train_step.writes)


def state(prog):
    return {n: prog.get_var(n) for n in prog.var_names()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name      # bit-identical


@pytest.fixture
def prog():
    p = Net().Compile(seed=0)
    p.keep_history()
    return p


def test_history_is_off_by_default_and_costs_nothing_then(data):
    prog = Net().Compile(seed=0)
    assert fluid.history_defaults()["enabled"] is False
    assert not prog.history.enabled
    prog.train_step(*data)
    assert len(prog.history) == 0
    assert "record(" not in _entry_source(prog.train_step)
    with pytest.raises(fluid.RewindError, match="keeps no history.*keep_history"):
        prog.rewind(1)
    prog.keep_history()
    assert "record(" in _entry_source(prog.train_step)
    assert "record(" not in _entry_source(prog.infer)       # it changes nothing


def _entry_source(method):
    import linecache
    code = type(method).__call__.__code__
    return "".join(linecache.getlines(code.co_filename))


def test_rewind_restores_parameters_and_adam_state_bit_for_bit(prog, data):
    for _ in range(5):
        prog.train_step(*data)
    before = state(prog)
    losses = [prog.train_step(*data) for _ in range(7)]
    assert any(not np.array_equal(prog.get_var(n), before[n]) for n in before)
    report = prog.rewind(7)
    assert_same(state(prog), before)
    assert [c.label for c in report.undone] == ["train_step"] * 7
    assert report.number == 5 and len(prog.history) == 5
    # the same steps again give the same losses
    assert [prog.train_step(*data) for _ in range(7)] == losses


def test_history_lists_calls_with_their_loss_newest_first(prog, data):
    losses = [prog.train_step(*data) for _ in range(3)]
    prog.infer(data[0])                               # changes nothing: not in the history
    changes = prog.history.changes()
    assert [(c.number, c.kind, c.label) for c in changes] == [
        (3, "call", "train_step"), (2, "call", "train_step"), (1, "call", "train_step")]
    assert [c.loss for c in changes] == losses[::-1]
    assert all(c.nbytes == call_cost(prog) for c in changes)


def test_a_destructive_set_var_and_ten_steps_are_taken_back(prog, data):
    for _ in range(3):
        prog.train_step(*data)
    before = state(prog)
    prog.set_var("learning_rate_0", [1e6])
    for _ in range(10):
        prog.train_step(*data)
    assert not np.isfinite(prog.get_var("net/fc_0.w_0")).all() or \
        np.abs(prog.get_var("net/fc_0.w_0")).max() > 1e3
    assert prog.history.changes()[10].label == "set_var learning_rate_0"
    prog.rewind(11)
    assert_same(state(prog), before)


def test_set_parameters_is_one_change(prog, data):
    before = state(prog)
    prog.set_parameters({"net/fc_1.b_0": [3.0]})
    assert prog.history.changes()[0].label == "set_parameters"
    prog.rewind()
    assert_same(state(prog), before)


def test_a_failed_rewind_changes_nothing(prog, data):
    for _ in range(3):
        prog.train_step(*data)
    before = state(prog)
    with pytest.raises(fluid.RewindError,
                       match="cannot rewind 4 change.s.: the history of Net holds 3"):
        prog.rewind(4)
    with pytest.raises(fluid.RewindError, match=">= 1"):
        prog.rewind(0)
    assert_same(state(prog), before)
    assert len(prog.history) == 3


def test_a_failed_step_is_not_a_change(prog, data):
    prog.train_step(*data)
    with pytest.raises(fluid.FeedError):
        prog.train_step(data[0][:, :3], data[1])
    assert len(prog.history) == 1


def test_bounds_forget_the_oldest_changes(data):
    prog = Net().Compile(seed=0)
    per_call = call_cost(prog)
    prog.keep_history(calls=4)
    for _ in range(6):
        prog.train_step(*data)
    assert [c.number for c in prog.history.changes()] == [6, 5, 4, 3]
    with pytest.raises(fluid.RewindError, match="2 older change"):
        prog.rewind(5)
    prog.keep_history(calls=100, memory=3 * per_call)
    assert len(prog.history) == 3 and prog.history.nbytes == 3 * per_call
    prog.keep_history(memory=per_call - 1)            # not even one call fits
    prog.train_step(*data)
    assert len(prog.history) == 0
    with pytest.raises(fluid.RewindError, match="more than the history's memory budget"):
        prog.rewind(1)
    prog.keep_history(False)
    assert not prog.history.enabled and prog.history.nbytes == 0


def test_defaults_apply_to_programs_compiled_later():
    before = fluid.history_defaults()
    try:
        settings = fluid.history_defaults(True, calls=7, memory=1 << 20)
        assert settings == {"enabled": True, "calls": 7, "memory": 1 << 20}
        prog = Net().Compile(seed=0)
        assert prog.history.enabled and prog.history.calls == 7
        with pytest.raises(ValueError, match="memory"):
            fluid.history_defaults(memory=-1)
    finally:
        fluid.history_defaults(**before)
    assert (DEFAULT_CALLS, DEFAULT_MEMORY) == (1000, 256 << 20)


def settle() -> None:
    """Free what the interpreter keeps only for itself, so that what tracemalloc counts is
    what the program holds: garbage and free lists (a full collection clears both), and
    CPython's cache of attribute lookups, whose 4,096 entries each keep the name they were
    looked up by. NumPy looks ``item`` up by a new string on each ``.item()``, so a few
    thousand steps fill entries with such names, at a rate that depends on what ran
    before in the process (other types' lookups free entries): 10-20 KB that are no
    part of the history."""
    gc.collect()
    sys._clear_type_cache()


def test_memory_budget_holds_over_10000_steps(data):
    """10,000 steps with a budget of 30 steps' state: the history never holds more, and
    what the process holds (traced from the start) is the scope plus at most the budget,
    flat from the first thousand steps to the last."""
    prog = Net().Compile(seed=0)
    per_call = call_cost(prog)
    budget = 30 * per_call
    prog.keep_history(memory=budget)
    x, y = data
    prog.train_step(x, y)                           # plans and buffers exist before tracing
    settle()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        held = []
        for step in range(1, 10_001):
            prog.train_step(x, y)
            assert prog.history.nbytes <= budget
            if step % 1000 == 0:
                settle()
                held.append(tracemalloc.get_traced_memory()[0] - base)
    finally:
        tracemalloc.stop()
    assert len(prog.history) == 30 and prog.history.nbytes == budget
    # arrays allocated while tracing that are still alive: the scope's and the history's.
    # The budget counts array bytes plus a fixed overhead per array; what the interpreter
    # keeps besides (view and generation objects) adds the rest: 123 KB measured against
    # a 106 KB budget + one call, the same in any order of the tests (`settle`), growing by
    # 0.4 KB from the first thousand steps to the last (the list `held` itself). Unbounded
    # growth would be ~20 MB over 10,000 steps.
    assert max(held) < per_call + budget + 64 * 1024, held
    assert max(held) - min(held) < 16 * 1024, held
    prog.rewind(30)


def test_reader_position_is_rewound(tmp_path):
    path = str(tmp_path / "data.recordio")
    xs = np.arange(80, dtype=np.float32).reshape(40, 2)
    fluid.recordio.write_arrays(path, (xs,))

    class Reading(fluid.Program):
        @fluid.network()
        def next_batch(self):
            reader = fluid.batch_reader(file=path, batch_size=4, shape=[[2]],
                                        dtype=["float32"])
            return fluid.layers.scale(reader.next_item(), scale=1.0)

    prog = Reading().Compile()
    prog.keep_history()
    first = [prog.next_batch()[:, 0].tolist() for _ in range(6)]
    report = prog.rewind(4)
    assert report.readers == {"reader_0": 2}
    assert [prog.next_batch()[:, 0].tolist() for _ in range(4)] == first[2:]
    prog.reset_readers()
    assert prog.next_batch()[:, 0].tolist() == first[0]
    prog.rewind(2)                                   # the call and the reset
    assert prog.next_batch()[:, 0].tolist() == [48.0, 50.0, 52.0, 54.0]   # batch 6
    prog.close()


def test_rewinds_between_steps_of_another_thread(data):
    """Rewind takes the scope's lock, so with steps running in another thread each rewind
    lands between two steps: the state is then bit for bit the state of a sequential run
    after as many steps as the history counts."""
    x, y = data
    reference = Net().Compile(seed=0)
    states = [state(reference)]

    def expected(count):
        while len(states) <= count:
            reference.train_step(x, y)
            states.append(state(reference))
        return states[count]

    prog = Net().Compile(seed=0)
    prog.keep_history()
    stop = threading.Event()

    def train():
        end = time.monotonic() + 60         # bounded; the main thread stops it sooner
        while not stop.is_set() and time.monotonic() < end:
            prog.train_step(x, y)
            time.sleep(0.0002)              # a lock is not fair: leave the rewinder a turn

    worker = threading.Thread(target=train)
    worker.start()
    rewinds, deadline = 0, time.monotonic() + 60
    try:
        while rewinds < 20 and worker.is_alive() and time.monotonic() < deadline:
            with prog.scope.lock:
                if len(prog.history) >= 2:
                    prog.rewind(1 + rewinds % 2)
                    rewinds += 1
                    assert_same(state(prog), expected(prog.history.count))
            time.sleep(0.002)               # let the worker take some steps
    finally:
        stop.set()
        worker.join(30)
    assert not worker.is_alive()
    assert rewinds == 20
    assert_same(state(prog), expected(prog.history.count))


def test_rewinding_past_a_recompile_brings_the_earlier_program_back(prog, data):
    for _ in range(3):
        prog.train_step(*data)
    before = state(prog)
    old_program = prog.program

    class Wider(Net):
        hidden = 12

    report = prog.recompile(Wider)
    assert "net/fc_0.w_0" in report.reset
    assert prog.get_var("net/fc_0.w_0").shape == (4, 12)
    for _ in range(2):
        prog.train_step(*data)
    changes = prog.history.changes()
    assert [c.kind for c in changes[:3]] == ["call", "call", "recompile"]
    assert changes[2].label == "recompile Wider"
    undone = prog.rewind(3)
    assert undone.program_restored == "Net"
    assert prog.program is old_program and prog.origin.source_class is Net
    assert_same(state(prog), before)
    assert prog.infer(data[0]).shape == (32, 1)
    prog.train_step(*data)


def test_a_method_kept_from_before_a_recompile_says_so(prog, data):
    step = prog.train_step
    prog.recompile()
    with pytest.raises(RuntimeError, match="belongs to an earlier program"):
        step(*data)
    prog.train_step(*data)


def test_a_trainer_program_of_parameter_servers_keeps_no_history():
    from tests.distributed.nets import FitALine
    plan = fluid.transpile(FitALine().Compile(seed=0), main="train_step", trainers=1,
                           pservers=1)
    trainer = fluid.CompiledProgram(plan.trainer_program(0), seed=0)
    assert not trainer.history.enabled
    with pytest.raises(fluid.RewindError, match="parameter servers"):
        trainer.keep_history()


def test_reports_read_well(prog, data):
    prog.train_step(*data)
    prog.train_step(*data)
    assert repr(prog.history).startswith("<history on: 2 change(s) in ")
    text = str(prog.rewind(2))
    assert text == ("fluid: rewound Net by 2 change(s) (train_step x2); its state is as it "
                    "was when its history began")
