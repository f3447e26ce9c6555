"""In a real Jupyter kernel: interrupting training (the stop button, SIGINT) leaves the
parameters at the last completed step, and compile errors point at the cell's line."""
import json
import re
import time

import pytest

pytest.importorskip("ipykernel")
pytest.importorskip("jupyter_client")

from tests.extension.helpers import Kernel

SETUP = '''
%load_ext fluid
import json, sys
import numpy as np

class Wide(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[256], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.fc(input=x, size=256, act="tanh")
        h = fluid.layers.fc(input=h, size=256, act="tanh")
        p = fluid.layers.fc(input=h, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=p, label=y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(cost)
        return cost

rng = np.random.default_rng(0)
X = rng.standard_normal((512, 256)).astype("float32")
Y = rng.standard_normal((512, 1)).astype("float32")
net = Wide().Compile(seed=0)

def replay(steps):
    ref = Wide().Compile(seed=0)
    for _ in range(steps):
        ref.train_step(X, Y)
    return ref

def same(a, b):
    pa, pb = a.parameters(), b.parameters()
    return all(np.array_equal(pa[k], pb[k]) for k in pa)

def mid_step():
    """Whether the last KeyboardInterrupt hit inside a compiled step."""
    tb = sys.last_traceback
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_code.co_filename
    return name.startswith("<fluid:") or "fluid_interactive" in name
'''


@pytest.fixture
def kernel(tmp_path, kernel_env):
    env = dict(kernel_env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    k = Kernel(str(tmp_path), env=env)
    try:
        setup = k.execute(SETUP)
        assert setup["status"] == "ok", setup
        yield k
    finally:
        k.close()


def interrupt_after(kernel, code, seconds):
    msg_id = kernel.start(code)
    time.sleep(seconds)
    kernel.interrupt()
    return kernel.wait_reply(msg_id)


def last_json(result):
    return json.loads(result["stdout"].strip().splitlines()[-1])


def test_interrupting_a_plain_loop_leaves_a_completed_step(kernel):
    hits_mid_step = 0
    for _ in range(3):
        reply = interrupt_after(kernel, "done = 0\nwhile True:\n"
                                        "    net.train_step(X, Y)\n    done += 1\n", 1.5)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        check = kernel.execute(
            "ref = replay(done)\n"
            "print(json.dumps({'done': done, 'at_done': same(net, ref),\n"
            "    'at_done_plus_1': same(net, replay(done + 1)) if not same(net, ref) else False,\n"
            "    'mid_step': mid_step()}))\n"
            "net = replay(0)")
        assert check["status"] == "ok", check
        r = last_json(check)
        assert r["done"] > 0
        # The loop counts a step after it returns; the interrupt can land between the two.
        assert r["at_done"] or r["at_done_plus_1"], r
        hits_mid_step += r["mid_step"]
        if hits_mid_step:
            break
    assert hits_mid_step, "no interrupt landed inside a step; the check proved nothing"


def test_interrupting_fluid_train_returns_the_history(kernel):
    reply = interrupt_after(kernel, "history = fluid.train(net.train_step, steps=10**9,\n"
                                    "                      data=lambda step: (X, Y))", 1.5)
    assert reply["status"] == "ok", reply            # no traceback: a clean stop
    check = kernel.execute(
        "print(json.dumps({'stopped': history.stopped, 'steps': history.steps,\n"
        "                  'losses': len(history.loss),\n"
        "                  'exact': same(net, replay(history.steps))}))")
    r = last_json(check)
    assert r["stopped"] == "interrupted" and r["steps"] > 0
    assert r["losses"] == r["steps"]
    assert r["exact"], r
    again = kernel.execute("print(net.train_step(X, Y) > 0)")   # the program still trains
    assert again["stdout"].strip() == "True"


def test_compile_errors_point_at_the_cell(kernel):
    result = kernel.execute('''class Bad(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        h = fluid.layers.fc(input=x, size=2)
        return fluid.layers.elementwise_add(h, x)

Bad().Compile()''')
    assert result["status"] == "error" and result["reply"]["ename"] == "ShapeError"
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(result["reply"]["traceback"]))
    assert "fluid_interactive" not in text.split("ShapeError:")[0]
    assert "extension/fluid" not in text
    assert "return fluid.layers.elementwise_add(h, x)" in text
    assert "Bad().Compile()" in text
    # the message names the cell as IPython's own frames do, not its temporary file
    assert re.search(r"at Cell In\[\d+\], line 6 \(in f\(\)\)", text), text
    assert "ipykernel_" not in text
