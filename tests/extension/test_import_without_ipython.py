"""`import fluid` and the notebook helpers work where IPython cannot be imported at all."""
import os
import subprocess
import sys
import textwrap

from tests.extension.helpers import ROOT

BLOCKER = textwrap.dedent("""
    import sys
    class Block:
        BLOCKED = ("IPython", "ipykernel", "ipywidgets", "traitlets", "jupyter_client")
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.BLOCKED:
                raise ImportError(f"blocked for this test: {name}")
            return None
    sys.meta_path.insert(0, Block())
""")


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "extension")]),
               FLUID_DEVICE="cpu")
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_import_fluid_and_train_without_ipython():
    proc = run_python("""
        import numpy as np
        try:
            import IPython
        except ImportError:
            pass
        else:
            raise SystemExit("the blocker did not block IPython")
        import fluid
        import fluid.display, fluid.live, fluid.training, fluid.widgets, fluid.var_stats
        import fluid.timetravel
        class Net(fluid.Program):
            @fluid.network("x", "y")
            def train_step(self, x, y):
                x = fluid.layers.data(name="x", shape=[3], dtype="float32")
                y = fluid.layers.data(name="y", shape=[1], dtype="float32")
                cost = fluid.layers.mean(fluid.layers.square_error_cost(
                    input=fluid.layers.fc(input=x, size=1), label=y))
                fluid.optimizer.SGD(learning_rate=0.1).minimize(cost)
                return cost
        net = Net().Compile(seed=0)
        X, Y = np.ones((4, 3), "float32"), np.ones((4, 1), "float32")
        history = fluid.train(net.train_step, steps=20, data=lambda step: (X, Y),
                              progress="text")
        assert history.steps == 20 and history.stopped == "finished", history
        g = fluid.graph(net)
        assert g.dot.startswith("digraph")
        print(repr(fluid.explore(net)).splitlines()[0])
        net.keep_history()
        net.train_step(X, Y)
        net.rewind(1)
        assert "no differences" in fluid.timetravel.DiffView(fluid.diff(Net, net)).text()
        bad = [m for m in sys.modules if m.split(".")[0] in ("IPython", "ipykernel", "ipywidgets")]
        assert not bad, bad
        print("OK")
    """)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert proc.stdout.rstrip().endswith("OK")
    assert "train_step: 20/20" in proc.stdout          # the plain-text progress


def test_loading_the_extension_needs_ipython_only_then():
    proc = run_python("""
        import fluid
        try:
            fluid.load_ipython_extension(object())
        except ImportError as e:
            print("ImportError:", e)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "ImportError: blocked for this test: IPython" in proc.stdout
