"""Several threads calling one compiled program get the answers of some sequential order
of their calls: methods that write nothing run side by side with their own plan
instances, methods that change state (parameters, a reader's position, random draws) take
turns, and every reader sample goes to exactly one call."""
import threading

import numpy as np
import pytest

import fluid


class Classifier(fluid.Program):
    """256-512-512-10: big enough that calls overlap in time."""

    @fluid.network("x", "label")
    def train_step(self, x, label):
        x = fluid.layers.data(name="x", shape=[256], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        logits = self.net(x)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        lr = fluid.layers.exponential_decay(learning_rate=0.1, decay_steps=1, decay_rate=0.5,
                                            staircase=True)
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
        return loss, lr           # the learning rate says which step this call was

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[256], dtype="float32")
        return fluid.layers.softmax(self.net(x))

    def net(self, x):
        with fluid.var_scope("net"):
            h = fluid.layers.fc(input=x, size=512, act="relu")
            h = fluid.layers.fc(input=h, size=512, act="relu")
            return fluid.layers.fc(input=h, size=10)


def _inputs(n, seed, rows=64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((rows, 256)).astype("float32") for _ in range(n)]


def _labels(n, seed, rows=64):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 10, (rows, 1)).astype("int64") for _ in range(n)]


def _run_threads(targets):
    errors = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as e:
                errors.append(e)
        return run
    threads = [threading.Thread(target=guard(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    assert not errors, errors


def test_concurrent_infer_equals_sequential_infer():
    prog = Classifier().Compile(seed=0)
    xs = {k: _inputs(40, seed=k) for k in range(2)}
    want = {k: [prog.infer(x) for x in xs[k]] for k in xs}
    got = {k: [None] * 40 for k in xs}

    def caller(k):
        def run():
            for _ in range(3):
                for i, x in enumerate(xs[k]):
                    out = prog.infer(x)
                    if got[k][i] is not None:
                        np.testing.assert_array_equal(out, got[k][i])
                    got[k][i] = out
        return run
    _run_threads([caller(0), caller(1)])
    for k in xs:
        for g, w in zip(got[k], want[k]):
            np.testing.assert_array_equal(g, w)
    assert not prog.infer.changes_state and prog.train_step.changes_state


def test_concurrent_training_equals_a_sequential_order_of_the_same_calls():
    # One BLAS thread throughout: a plan this large would otherwise measure one thread
    # against two, and a GEMM's last bits depend on the count (docs/architecture.md).
    fluid.set_threads(1)
    try:
        _concurrent_equals_sequential()
    finally:
        fluid.set_threads(None)


def _concurrent_equals_sequential():
    threads, per_thread = 4, 6
    xs = {k: _inputs(per_thread, seed=10 + k) for k in range(threads)}
    ys = {k: _labels(per_thread, seed=20 + k) for k in range(threads)}
    prog = Classifier().Compile(seed=1)
    done = []                                   # (step learning rate, thread, call, loss)

    def trainer(k):
        def run():
            for i in range(per_thread):
                loss, lr = prog.train_step(xs[k][i], ys[k][i])
                done.append((lr, k, i, loss))
        return run
    _run_threads([trainer(k) for k in range(threads)])
    assert len(done) == threads * per_thread
    order = sorted(done, key=lambda d: -d[0])   # the learning rate halves every step
    assert len({d[0] for d in done}) == len(done), "two calls ran as the same step"
    replay = Classifier().Compile(seed=1)
    for lr, k, i, loss in order:
        again, lr_again = replay.train_step(xs[k][i], ys[k][i])
        assert (again, lr_again) == (loss, lr)
    for name, value in replay.parameters().items():
        np.testing.assert_array_equal(prog.get_var(name), value, err_msg=name)


def test_infer_beside_training_sees_whole_steps_only():
    # One BLAS thread, as above: the training plan's thread probes would otherwise change
    # the last bits of the GEMMs a concurrent infer runs, and this test compares bits.
    fluid.set_threads(1)
    try:
        _infer_sees_whole_steps()
    finally:
        fluid.set_threads(None)


def _infer_sees_whole_steps():
    prog = Classifier().Compile(seed=2)
    probe = _inputs(1, seed=5)[0]
    xs, ys = _inputs(12, seed=6), _labels(12, seed=7)
    snapshots = [prog.parameters()]
    seen = []
    stop = threading.Event()

    def train():
        for x, y in zip(xs, ys):
            prog.train_step(x, y)
            snapshots.append(prog.parameters())   # only this thread writes
        stop.set()

    def infer():
        while not stop.is_set():
            seen.append(prog.infer(probe))
    _run_threads([train, infer])
    assert_whole_steps(seen, Classifier().Compile(seed=2), snapshots, probe)


def assert_whole_steps(seen: list, reference, states: list, probe) -> None:
    """Each of ``seen`` (infer's outputs) is ``reference.infer(probe)`` with one of
    ``states`` (the parameters after whole steps): no call mixed two steps."""
    allowed = []
    for params in states:
        reference.set_parameters(params)
        allowed.append(reference.infer(probe))
    assert seen
    for out in seen:
        assert any(np.array_equal(out, a) for a in allowed), "infer mixed two steps"


class ReadsAll(fluid.Program):
    data = None

    @fluid.network()
    def take(self):
        reader = fluid.batch_reader(data=self.data, batch_size=10, shape=[[1]],
                                    dtype=["int64"])
        return reader.next_item()   # one slot: the var itself


def test_every_sample_of_a_reader_goes_to_exactly_one_call():
    ids = np.arange(20000, dtype="int64").reshape(-1, 1)
    prog = ReadsAll(data=(ids,)).Compile(seed=0)
    taken = [[] for _ in range(4)]

    def taker(k):
        def run():
            while True:
                try:
                    taken[k].append(prog.take())
                except fluid.EOFException:
                    return
        return run
    _run_threads([taker(k) for k in range(4)])
    got = np.sort(np.concatenate([b for t in taken for b in t]).ravel())
    np.testing.assert_array_equal(got, ids.ravel())


@pytest.mark.parametrize("threads", [2, 4])
def test_state_changing_calls_keep_counters_in_step(threads):
    prog = Classifier().Compile(seed=4)
    x, y = _inputs(1, seed=2)[0], _labels(1, seed=2)[0]
    _run_threads([lambda: [prog.train_step(x, y) for _ in range(5)]] * threads)
    counter = prog.get_var("@LR_DECAY_COUNTER@")
    assert int(counter[0]) == 5 * threads


class Normalised(fluid.Program):
    @fluid.network("x")
    def train_step(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        loss = fluid.layers.mean(self.net(x))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        return self.net(x)

    @fluid.network("x", is_test=True)
    def sample(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        with fluid.var_scope("net"):
            return fluid.layers.dropout(x, dropout_prob=0.5, is_test=False)

    def net(self, x):
        with fluid.var_scope("net"):
            h = fluid.layers.batch_norm(fluid.layers.fc(input=x, size=8))
            return fluid.layers.dropout(h, dropout_prob=0.5)


def test_inference_with_batch_norm_and_dropout_changes_nothing_and_runs_unlocked():
    prog = Normalised().Compile(seed=0)
    x = np.random.default_rng(0).standard_normal((16, 4)).astype("float32")
    prog.train_step(x)
    stats = {n: prog.get_var(n) for n in prog.var_names()}
    assert prog.train_step.changes_state and not prog.infer.changes_state
    assert prog.sample.changes_state        # dropout told to train draws even in inference
    outs = []
    _run_threads([lambda: outs.append(prog.infer(x)) for _ in range(4)])
    for out in outs:
        np.testing.assert_array_equal(out, outs[0])
    for name, value in stats.items():
        np.testing.assert_array_equal(prog.get_var(name), value)
    assert "S.update" not in prog.infer.source
