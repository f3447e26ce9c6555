"""The compiled tier is an optimisation: when its cache folder cannot be made (the
folder's name is a file's, HOME is a file, HOME is /proc), it says so once and the calls
run NumPy kernels; no call fails for it."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from runtime.test_history import Net  # Adam: a plan that asks for compiled kernels

import fluid
from fluid_interactive.kernels import build

pytest.importorskip("numba")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cases(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    return {
        "FLUID_KERNEL_CACHE names a file": {"FLUID_KERNEL_CACHE": str(a_file)},
        "HOME is a file": {"HOME": str(a_file), "FLUID_KERNEL_CACHE": None},
        "HOME is /proc": {"HOME": "/proc", "FLUID_KERNEL_CACHE": None},
    }


@pytest.mark.parametrize("case", ["FLUID_KERNEL_CACHE names a file", "HOME is a file",
                                  "HOME is /proc"])
def test_an_unusable_cache_folder_warns_once_and_runs_numpy(case, tmp_path, monkeypatch):
    monkeypatch.setenv("FLUID_KERNELS", "auto")
    for name, value in _cases(tmp_path)[case].items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    build.forget_cache_dir()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 1)).astype(np.float32)
    prog = Net().Compile(seed=0)
    with pytest.warns(fluid.KernelCacheWarning, match="NumPy") as caught:
        losses = [prog.train_step(x, y) for _ in range(3)]
    ours = [w for w in caught if issubclass(w.category, fluid.KernelCacheWarning)]
    assert len(ours) == 1 and ours[0].filename == __file__   # the user's line
    assert prog.train_step.tier == "numpy"
    reference = Net().Compile(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fluid.KernelCacheWarning)
        expected = [reference.train_step(x, y) for _ in range(3)]
    assert losses == expected
    with warnings.catch_warnings():   # once per process and folder
        warnings.simplefilter("error")
        Net().Compile(seed=1).train_step(x, y)
    build.forget_cache_dir()


def test_a_fresh_process_with_home_in_proc_trains(tmp_path):
    """The whole path of a new process (import, the preload of an interactive session,
    a training call), with nothing patched."""
    script = textwrap.dedent("""
        import sys, warnings
        sys.ps1 = '>>> '   # as the Python prompt: the package preloads the cache
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            import numpy as np, fluid
            sys.path.insert(0, sys.argv[1])
            from runtime.test_history import Net
            x = np.ones((4, 4), np.float32); y = np.ones((4, 1), np.float32)
            prog = Net().Compile(seed=0)
            print([round(prog.train_step(x, y), 6) for _ in range(2)], prog.train_step.tier)
        print(sum(issubclass(i.category, fluid.KernelCacheWarning) for i in w))
    """)
    env = {k: v for k, v in os.environ.items() if k != "FLUID_KERNEL_CACHE"}
    env.update(HOME="/proc", FLUID_KERNELS="auto",
               PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "extension")]))
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", script, tests], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-2].endswith("numpy") and lines[-1] == "1", out.stdout + out.stderr[-2000:]
