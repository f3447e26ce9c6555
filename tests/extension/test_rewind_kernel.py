"""In a real Jupyter kernel: a cell that wrecks training (learning rate 1e6 for 10 steps)
is undone by ``%fluid rewind 10``, back to bit-identical parameters and Adam state, after
which training goes on exactly as if the cell had never run."""
import json

import pytest

pytest.importorskip("ipykernel")
pytest.importorskip("jupyter_client")

from tests.extension.helpers import Kernel

SETUP = '''
%load_ext fluid
import json
import numpy as np

class Net(fluid.Program):
    @fluid.network("x", "y", "lr")
    def train_step(self, x, y, lr):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        lr = fluid.layers.data(name="lr", shape=[1], dtype="float32", append_batch_size=False)
        h = fluid.layers.fc(input=x, size=16, act="tanh")
        p = fluid.layers.fc(input=h, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=p, label=y))
        fluid.optimizer.Adam(learning_rate=lr).minimize(cost)
        return cost

rng = np.random.default_rng(0)
X = rng.standard_normal((64, 8)).astype("float32")
Y = (X @ rng.standard_normal((8, 1)) * 0.1).astype("float32")
GOOD = [0.01]
net = Net().Compile(seed=0)

def state(prog):
    return {n: prog.get_var(n) for n in prog.var_names()}

def identical(a, b):
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)
'''


@pytest.fixture
def kernel(tmp_path, kernel_env):
    k = Kernel(str(tmp_path), env=dict(kernel_env, OPENBLAS_NUM_THREADS="1"))
    try:
        setup = k.execute(SETUP)
        assert setup["status"] == "ok", setup
        yield k
    finally:
        k.close()


def check(kernel, code):
    result = kernel.execute(code)
    assert result["status"] == "ok", result
    return json.loads(result["stdout"].strip().splitlines()[-1])


def test_rewind_undoes_a_destructive_cell_bit_for_bit(kernel):
    good = check(kernel, "for _ in range(20):\n    net.train_step(X, Y, GOOD)\n"
                         "before = state(net)\n"
                         "print(json.dumps({'loss': net.train_step(X, Y, GOOD)}))")
    check(kernel, "net.rewind(1)\nprint(json.dumps({}))")    # keep 'before' as the state
    bad = kernel.execute("for _ in range(10):\n    net.train_step(X, Y, [1e6])\n")
    assert bad["status"] == "ok", bad
    wrecked = check(kernel, "print(json.dumps({'same': identical(state(net), before), "
                            "'w': float(np.abs(net.get_var('fc_0.w_0')).max())}))")
    assert not wrecked["same"] and wrecked["w"] > 1e3
    history = kernel.execute("%fluid history")
    assert history["status"] == "ok", history
    table = next(o for o in history["outputs"] if o["type"] == "execute_result")
    assert "net: history on" in table["data"]["text/plain"]
    rewound = kernel.execute("%fluid rewind 10")
    assert rewound["status"] == "ok", rewound
    assert "rewound net by 10 change(s) (train_step x10)" in rewound["stdout"]
    after = check(kernel, "print(json.dumps({'same': identical(state(net), before),\n"
                          "    'loss': net.train_step(X, Y, GOOD)}))")
    assert after["same"]                               # parameters and Adam state
    assert after["loss"] == good["loss"]               # training resumes exactly
