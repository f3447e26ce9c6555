"""Fixtures for the notebook extension's tests.

``shell``: one in-process IPython shell for the session (no kernel, no zmq; cells run in
milliseconds) with the history database off, whose user module is a private module rather
than pytest's ``__main__``. ``ip``: that shell with ``%load_ext fluid`` loaded and a fresh
namespace; the extension is unloaded afterwards. ``kernel_env``: the environment a real
kernel (nbclient, jupyter_client, JupyterLab) needs to import this checkout's ``fluid``.
"""
from __future__ import annotations

import gc
import os
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTENSION = os.path.join(ROOT, "extension")
NOTEBOOKS = os.path.join(ROOT, "notebooks")


def kernel_pythonpath() -> str:
    parts = [ROOT, EXTENSION] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                 if p]
    return os.pathsep.join(dict.fromkeys(parts))


@pytest.fixture
def kernel_env(monkeypatch, tmp_path):
    """Kernels started by this test import fluid from this checkout and keep their
    runtime files under the test's temporary directory."""
    monkeypatch.setenv("PYTHONPATH", kernel_pythonpath())
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.setenv("FLUID_DEVICE", "cpu")
    return dict(os.environ)


@pytest.fixture(scope="session")
def shell():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    if InteractiveShell.initialized():
        yield InteractiveShell.instance()
        return
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"   # caseless in IPython 8, lowercase in 9
    config.InteractiveShell.xmode = "Context"
    module = types.ModuleType("__fluid_test_main__")
    shell = InteractiveShell.instance(config=config, user_module=module)
    try:
        yield shell
    finally:
        InteractiveShell.clear_instance()
        sys.modules.pop("__fluid_test_main__", None)


@pytest.fixture
def ip(shell):
    """The shell with the extension loaded, a clean namespace and live reload on."""
    import fluid
    from fluid import live

    shell.reset(new_session=False)
    shell.run_line_magic("load_ext", "fluid")
    live.live_reload(True)
    try:
        yield shell
    finally:
        fluid.unload_ipython_extension(shell)
        shell.extension_manager.loaded.discard("fluid")
        live.live_reload(True)
        shell.reset(new_session=False)
        gc.collect()

