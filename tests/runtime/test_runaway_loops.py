"""A runaway training While cannot eat the process: the values it kept per iteration are
released when a call is interrupted (Ctrl-C) or fails, so the traceback a notebook keeps
holds none of them; ``max_iterations`` stops a loop that does not end with an error naming
it; a warning says when one call's kept values pass a size that can be set."""
import gc
import os
import subprocess
import sys
import textwrap
import warnings
import weakref

import numpy as np
import pytest

import fluid
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.loop_guard import loop_saved_limit, parse_size

HIDDEN = 32
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def loop_program(max_iterations=None, n=5, is_test=False, functional=False):
    """A training loop of up to ``n`` iterations whose counter grows by the fed ``step``
    per iteration: ``step=0`` makes it a loop that never ends (once it is planned)."""
    class Loop(fluid.Program):
        @fluid.network("x", "step")
        def train(self, x, step):
            x = fluid.layers.data(name="x", shape=[HIDDEN], dtype="float32")
            step = fluid.layers.data(name="step", shape=[1], dtype="int64",
                                     append_batch_size=False)
            h = fluid.layers.fc(x, size=HIDDEN, act="tanh")
            i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
            limit = fluid.layers.fill_constant(shape=[1], dtype="int64", value=n)
            w = fluid.layers.create_parameter([HIDDEN, HIDDEN], "float32", name="w")

            def body(i, h):
                return [i + step, fluid.layers.tanh(fluid.layers.matmul(h, w))]
            if functional:
                i, h = fluid.layers.while_loop(lambda i, h: fluid.layers.less_than(i, limit),
                                               body, [i, h], is_test=is_test,
                                               name="decoder", max_iterations=max_iterations)
            else:
                cond = fluid.layers.less_than(i, limit)
                loop = fluid.layers.While(cond, is_test=is_test, max_iterations=max_iterations)
                with loop.block():
                    j, new_h = body(i, h)
                    fluid.layers.assign(new_h, output=h)
                    fluid.layers.assign(j, output=i)
                    fluid.layers.less_than(i, limit, cond=cond)
            loss = fluid.layers.mean(h)
            if not is_test:
                fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss
    return Loop().Compile(seed=0)


ONE, NONE = np.array([1], np.int64), np.array([0], np.int64)


def x_batch(rows=16):
    return np.random.default_rng(0).standard_normal((rows, HIDDEN)).astype(np.float32)


def body_namespace(prog):
    """The globals of the forward loop body's generated function."""
    code = list(prog.train._runner.plans.values())[0].code
    bodies = [c for c in code.children.values() if c.filename != code.filename
              and any(k.endswith("_tanh") for k in c.fn.__globals__)]
    return bodies[0].fn.__globals__


def watch_tanh(prog, stop_after, error):
    """Wrap the body's tanh kernel: a weak reference to each value it makes (the loop
    keeps them for the gradient), and ``error`` raised in its call ``stop_after``
    (None: never)."""
    ns = body_namespace(prog)
    key = next(k for k in ns if k.endswith("_tanh"))
    original, made = ns[key], []

    def tanh(*args):
        if stop_after is not None and len(made) == stop_after:
            raise error
        out = original(*args)
        made.append(weakref.ref(out))
        return out
    ns[key] = tanh
    return made


def arrays_in_frames(tb, depth=3):
    """The bytes of the distinct arrays the frames of a traceback reach through their
    locals (into lists, tuples and dicts, ``depth`` deep), below the test's own frame."""
    tb = tb.tb_next if tb.tb_frame.f_code.co_filename == __file__ else tb
    seen, total = set(), 0

    def visit(obj, level):
        nonlocal total
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += obj.nbytes
        elif level < depth and isinstance(obj, (list, tuple)):
            for item in obj:
                visit(item, level + 1)
        elif level < depth and isinstance(obj, dict):
            for item in obj.values():
                visit(item, level + 1)
    while tb is not None:
        for name, value in tb.tb_frame.f_locals.items():
            if name != "S":   # the scope: the program's own state
                visit(value, 0)
        tb = tb.tb_next
    return total


PER_RUN = 16 * HIDDEN * 4   # one [16, HIDDEN] float32 value


@pytest.mark.parametrize("error", [KeyboardInterrupt(), FloatingPointError("injected")],
                         ids=["interrupted", "failed"])
def test_a_stopped_runaway_loop_releases_what_it_kept(error):
    prog = loop_program()
    x = x_batch()
    prog.train(x, ONE)                       # planned, with a loop that ends
    before = {k: prog.get_var(k) for k in prog.parameters()}
    made = watch_tanh(prog, 300, error)
    expected = KeyboardInterrupt if isinstance(error, KeyboardInterrupt) else fluid.KernelError
    with pytest.raises(expected) as info:
        prog.train(x, NONE)                  # the counter never grows: a runaway loop
    kept = info.value                        # as IPython keeps the last one
    gc.collect()
    assert len(made) == 300
    alive = sum(r() is not None for r in made)
    assert alive <= 2, alive                 # the values kept per iteration were dropped
    for exc in (kept, kept.__cause__):
        if exc is not None:                  # no frame of the traceback holds them
            assert arrays_in_frames(exc.__traceback__) < 8 * PER_RUN
    for k, v in before.items():              # and nothing was committed
        np.testing.assert_array_equal(prog.get_var(k), v)


def test_max_iterations_stops_a_loop_that_does_not_end():
    prog = loop_program(max_iterations=40)
    x = x_batch()
    prog.train(x, ONE)                       # 5 iterations: within the limit
    before = {k: prog.get_var(k) for k in prog.parameters()}
    made = watch_tanh(prog, None, None)
    with pytest.raises(fluid.LoopLimitError) as info:
        prog.train(x, NONE)
    message = str(info.value)
    assert "'while_0'" in message and "40 iterations" in message
    assert f"{os.path.basename(__file__)}:" in message    # the line that made the loop
    assert "max_iterations" in message and "no state was changed" in message
    assert len(made) == 40                   # iteration 41 never started
    gc.collect()
    assert sum(r() is not None for r in made) <= 1
    assert arrays_in_frames(info.value.__traceback__) < 8 * PER_RUN
    for k, v in before.items():
        np.testing.assert_array_equal(prog.get_var(k), v)
    prog.train(x, ONE)                       # and the next call runs as before


@pytest.mark.parametrize("limit, fails", [(5, False), (4, True)])
def test_max_iterations_counts_the_iterations_that_run(limit, fails):
    """N iterations are allowed; the error comes when iteration N+1 would start."""
    prog = loop_program(max_iterations=limit, n=5)
    if fails:
        with pytest.raises(fluid.LoopLimitError, match="ran 4 iterations"):
            prog.train(x_batch(), ONE)
    else:
        assert np.isfinite(prog.train(x_batch(), ONE))


def test_while_loop_takes_max_iterations_and_the_reference_interpreter_too():
    prog = loop_program(max_iterations=7, functional=True)
    with pytest.raises(fluid.LoopLimitError, match="'decoder'"):
        prog.train(x_batch(), NONE)
    block = prog.program.block("train")
    env = dict({k: prog.get_var(k) for k in prog.var_names()}, x=x_batch(), step=NONE)
    with pytest.raises(fluid.LoopLimitError, match="ran 7 iterations"):
        run_ops(block.ops, env, program=prog.program)


def test_an_inference_loop_takes_max_iterations():
    prog = loop_program(max_iterations=3, is_test=True)
    with pytest.raises(fluid.LoopLimitError):
        prog.train(x_batch(), NONE)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_max_iterations_must_be_a_positive_int(bad):
    with pytest.raises(fluid.OpArgumentError, match="max_iterations must be an int >= 1"):
        loop_program(max_iterations=bad)


@pytest.fixture
def saved_limit():
    before = loop_saved_limit()
    yield loop_saved_limit
    loop_saved_limit(before)


def test_a_warning_when_one_call_keeps_more_than_the_limit(saved_limit):
    prog = loop_program(n=200)
    x = x_batch()
    saved_limit(64 << 10)                    # 64 KiB: about 16 runs of [16, 32] values
    with pytest.warns(fluid.LoopMemoryWarning) as caught:
        prog.train(x, ONE)
    ours = [w for w in caught if issubclass(w.category, fluid.LoopMemoryWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "'while_0'" in message and "64.0 MiB" not in message and "0.1 MiB" in message
    assert ours[0].filename == __file__      # at the line that made the loop
    runs = int(message.split(" iterations")[0].rsplit(" ", 1)[1])
    assert 8 <= runs <= 40                   # as soon as the size passed the limit
    saved_limit(1 << 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prog.train(x, ONE)                   # below the limit: nothing said
        loop_program(n=200, is_test=True).train(x, ONE)   # keeps nothing


def test_the_limit_is_a_setting_and_an_environment_variable(saved_limit):
    assert parse_size("512M") == 512 << 20 and parse_size("64KiB") == 64 << 10
    assert parse_size("2g") == 2 << 30 and parse_size("1000") == 1000
    assert saved_limit("3M") == 3 << 20
    for bad in ("lots", "0", "-5M"):
        with pytest.raises(ValueError):
            saved_limit(bad)
    script = textwrap.dedent("""
        import fluid
        print(fluid.loop_saved_limit())
    """)
    env = dict(os.environ, FLUID_LOOP_SAVED_WARN="96K",
               PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "extension")]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.stdout.strip() == str(96 << 10), out.stderr[-2000:]
