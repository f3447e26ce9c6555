"""The thread policy (backend/threads.py): small plans run BLAS on one thread, switched
once; `fluid.set_threads` overrides; large plans run on every core, or, asked to measure,
keep whichever count measured faster; the environment's thread variables cap the count."""
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import fluid
from fluid_interactive.backend import threads


def blas_threads() -> set[int]:
    return set(threads.STATE.blas_threads())


def test_the_policy_sets_numpys_own_blas_and_keeps_scipys_on_one_thread():
    """NumPy's BLAS follows the policy; SciPy's, once loaded (only the compiled recurrent
    kernels call it, through Numba, one time step's product at a time), stays on one
    thread whatever the count; another framework's BLAS (torch's) is left alone."""
    import scipy.linalg.cython_blas  # noqa: F401  (loads SciPy's BLAS, as a kernel would)
    threads.STATE.rescan()
    blas = [d["filepath"] for d in threadpool_info() if d["user_api"] == "blas"]
    numpys = [f for f in blas if "/numpy" in f]   # the folder (its file says "scipy_openblas")
    scipys = [f for f in blas if "/scipy" in f]
    assert numpys, "NumPy's wheel bundles its OpenBLAS"
    assert sorted(lib.filepath for lib in threads.STATE._controllers()) == sorted(numpys)
    fluid.set_threads(2)
    counts = {d["filepath"]: d["num_threads"] for d in threadpool_info()
              if d["user_api"] == "blas"}
    assert all(counts[f] == min(2, threads.STATE.cores) for f in numpys)
    assert all(counts[f] == 1 for f in scipys)


def test_a_process_without_scipy_looks_for_none_of_its_blas():
    """Scanning the loaded libraries cost a process's first call about 2 ms; without
    SciPy imported there is no SciPy BLAS to find, and the policy does not look."""
    script = ("import fluid, sys\n"
              "from fluid_interactive.backend import threads\n"
              "threads.STATE._controllers()   # NumPy's BLAS, found first\n"
              "def scan(): raise AssertionError('scanned the libraries')\n"
              "threads.ThreadpoolController = scan\n"
              "threads.STATE._serial_libs = None\n"
              "assert threads.STATE._serial() == [] and 'scipy' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


pytestmark = pytest.mark.usefixtures("thread_policy")


@pytest.fixture(autouse=True)
def policy_restored():
    yield
    fluid.set_threads(None)


class Small(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
        fluid.optimizer.SGD(0.01).minimize(loss)
        return loss


def batch(n=16):
    rng = np.random.default_rng(0)
    return rng.random((n, 8), dtype=np.float32), rng.random((n, 1), dtype=np.float32)


def test_a_small_plan_runs_blas_on_one_thread_and_switches_once():
    prog = Small().Compile(seed=0)
    threads.STATE.use(2)   # as BLAS starts: one thread per core
    before = threads.STATE.switches
    for _ in range(5):
        prog.train(*batch())
    assert blas_threads() == {1}
    assert threads.STATE.switches == before + 1   # when its plan was built, only
    assert ".use(" not in prog.train.source        # a call pays nothing for the policy


def test_a_large_call_on_all_cores_puts_the_small_count_back(clock):
    threads.STATE.use(1)
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 0.6}, calls))
    for _ in range(1 + 2 * threads.PROBE_CALLS + 3):
        entry()
        assert threads.STATE.current == 1       # between calls: the small plans' count
    assert entry.choice == 2 and calls[-3:] == [2, 2, 2]


def test_set_threads_overrides_the_policy_from_the_next_call():
    prog = Small().Compile(seed=0)
    prog.train(*batch())
    fluid.set_threads(2)
    assert fluid.get_threads() == 2 and blas_threads() == {2}   # at once
    prog.train(*batch())
    assert blas_threads() == {2}
    fluid.set_threads(None)
    prog.train(*batch())
    assert blas_threads() == {1}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, "fastest"])
def test_set_threads_refuses_what_is_not_a_count(bad):
    with pytest.raises(ValueError, match="positive int, None or 'measure'"):
        fluid.set_threads(bad)


def test_by_default_a_large_plan_runs_on_every_core_whatever_the_timings(clock):
    """A count measured faster would change a GEMM's last bits with the machine's load:
    unless asked to measure, a large plan never chooses its count by timing."""
    fluid.set_threads(None)
    assert fluid.get_threads() is None
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 4.0}, calls))  # busy
    for _ in range(20):
        entry()
        assert threads.STATE.current == 1       # between calls: the small plans' count
    assert calls == [2] * 20 and not entry.totals
    fluid.set_threads("measure")
    assert fluid.get_threads() == "measure"
    for _ in range(1 + 2 * threads.PROBE_CALLS + 3):
        entry()
    assert entry.choice == 1 and calls[-3:] == [1, 1, 1]   # measured: one thread


def test_by_default_a_large_plan_measures_its_kernels_on_every_core(clock):
    """Its compiled kernels against its NumPy ones (the same values: a free choice)."""
    fluid.set_threads(None)
    tier, calls = FakeTier(), []
    seconds = {(2, True): 2.0, (2, False): 1.0}
    entry = threads.AdaptiveThreads(plan_with_kernels(clock, tier, seconds, calls), tier)
    for _ in range(2 + 2 * threads.PROBE_CALLS + 3):
        entry()
    assert {n for n, _ in calls} == {2} and entry.option == (2, False)
    assert calls[-3:] == [(2, False)] * 3


@pytest.fixture
def clock(monkeypatch):
    """A fake perf_counter that only the plans below advance: exact, on any machine."""
    now = [0.0]
    monkeypatch.setattr(threads.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(threads.STATE, "cores", 2)
    return now


def plan_costing(clock, seconds_per_thread_count, calls):
    def plan():
        calls.append(threads.STATE.current)
        clock[0] += seconds_per_thread_count[threads.STATE.current]
    return plan


def test_a_large_plan_gives_up_all_cores_at_once_when_they_are_far_slower(clock):
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 4.0}, calls))  # busy
    for _ in range(12):
        entry()
    assert calls[:3] == [1, 1, 2]   # one thread first, then the measurement's pair
    assert entry.choice == 1 and calls[3:] == [1] * 9


def test_a_large_plan_takes_all_cores_when_they_measure_faster(clock):
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 0.6}, calls))  # idle
    for _ in range(1 + 2 * threads.PROBE_CALLS + 5):
        entry()
    assert calls[1:1 + 2 * threads.PROBE_CALLS] == [1, 2] * threads.PROBE_CALLS
    assert entry.choice == 2 and calls[-5:] == [2] * 5


def test_one_slow_call_on_every_core_does_not_decide_a_measurement(clock):
    # a noisy machine: the first call on both cores is 2x the one-thread call (a hiccup,
    # below the busy-core factor), the others faster: the median chooses both cores
    costs = iter([2.0, 0.6, 0.6])
    calls = []

    def plan():
        calls.append(threads.STATE.current)
        clock[0] += 1.0 if threads.STATE.current == 1 else next(costs, 0.6)

    entry = threads.AdaptiveThreads(plan)
    for _ in range(1 + 2 * threads.PROBE_CALLS + 3):
        entry()
    assert calls.count(2) >= threads.PROBE_CALLS   # the measurement went on
    assert entry.choice == 2 and calls[-3:] == [2, 2, 2]


def test_a_large_plan_is_measured_again_less_often_while_nothing_changes(clock, monkeypatch):
    monkeypatch.setattr(threads, "RECHECK_CALLS", 5)
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 1.2}, calls))
    intervals = []
    for _ in range(150):
        entry()
        if not entry.probe and entry.countdown == entry.interval:   # a measurement ended
            intervals.append(entry.interval)
    assert entry.choice == 1
    assert intervals[:4] == [10, 20, 40, 80]   # each measurement confirms one thread
    assert calls.count(2) == 3 * len(intervals)   # none given up: 1.2x is below GIVE_UP


def test_no_count_changes_while_another_large_call_is_in_flight(clock, monkeypatch):
    threads.STATE.use(1)
    seen = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 0.5}, seen))
    monkeypatch.setattr(threads.STATE, "inflight", 1)   # another thread's large call
    for _ in range(10):
        entry()
        threads.STATE.use(2)   # a small plan asking meanwhile
    assert seen == [1] * 10 and threads.STATE.current == 1
    assert not entry.totals   # nothing measured under another call


def test_the_environment_caps_the_count(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert threads._cores() == 1
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert threads._cores() >= 1


def test_plans_are_classed_by_the_elements_they_touch():
    prog = Small().Compile(seed=0)
    prog.train(*batch(16))
    (code,) = prog.train.runner.plans.values()
    # x 16x8, the fc weight 8x1 and a few [16, 1] temporaries: far below the threshold
    assert 16 * 8 < code.work < 1000
    assert threads.is_small(code.work)
    assert not threads.is_small(threads.SMALL_WORK) or threads.STATE.cores == 1


def test_a_large_plan_measures_again_soon_when_its_kernels_change(clock):
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 0.6}, calls))
    for _ in range(1 + 2 * threads.PROBE_CALLS + 3):
        entry()
    assert entry.choice == 2 and not entry.probe and entry.countdown > 100
    entry.kernels_changed()   # the plan switched to compiled kernels
    entry()                   # runs with the count chosen; the next call measures
    assert not entry.probe and calls[-1] == 2
    entry()
    assert calls[-1] == 1 and len(entry.probe) == 2 * threads.PROBE_CALLS - 1
    assert entry.interval == threads.RECHECK_CALLS


def test_a_change_of_kernels_during_a_measurement_waits_for_its_end(clock):
    calls = []
    entry = threads.AdaptiveThreads(plan_costing(clock, {1: 1.0, 2: 0.6}, calls))
    entry()
    entry()                   # the measurement's first call
    entry.kernels_changed()
    while entry.probe:
        entry()
    assert entry.choice == 2 and entry.countdown > 100   # the measurement concluded
    entry()
    entry()
    assert len(entry.probe) == 2 * threads.PROBE_CALLS - 1   # and another began


class FakeTier:
    """A plan's compiled kernels, loaded: `use` chooses which kernels its calls run."""

    def __init__(self):
        self.ready, self.using = True, True

    def use(self, compiled):
        self.using = compiled


def plan_with_kernels(clock, tier, seconds, calls):
    """A plan whose call costs seconds[(thread count, compiled kernels in use)]."""
    def plan():
        calls.append((threads.STATE.current, tier.using))
        clock[0] += seconds[(threads.STATE.current, tier.using)]
    return plan


@pytest.mark.parametrize("compiled_wins", [True, False])
def test_a_plan_keeps_its_compiled_kernels_only_where_they_measured_faster(
        clock, compiled_wins):
    tier, calls = FakeTier(), []
    fast, slow = 0.5, 1.0
    one = {True: fast if compiled_wins else slow, False: slow if compiled_wins else fast}
    seconds = {(1, c): t for c, t in one.items()}
    seconds.update({(2, c): 1.5 * t for c, t in one.items()})   # a second core never pays
    entry = threads.AdaptiveThreads(plan_with_kernels(clock, tier, seconds, calls), tier)
    for _ in range(2 + 4 * threads.PROBE_CALLS + 5):
        entry()
    assert set(calls[2:2 + 4 * threads.PROBE_CALLS]) == set(seconds)   # all timed
    assert entry.option == (1, compiled_wins)
    assert calls[-5:] == [(1, compiled_wins)] * 5 and tier.using == compiled_wins


def test_a_small_plan_measures_its_kernels_on_one_thread_without_the_lock(clock):
    tier, calls = FakeTier(), []
    seconds = {(1, True): 2.0, (1, False): 1.0}
    entry = threads.AdaptiveThreads(plan_with_kernels(clock, tier, seconds, calls), tier,
                                    counts=(1,))
    threads.STATE.use(1)
    for _ in range(2 + 2 * threads.PROBE_CALLS + 3):
        entry()
    assert {n for n, _ in calls} == {1} and entry.option == (1, False)
    assert calls[-3:] == [(1, False)] * 3 and threads.STATE.inflight == 0
