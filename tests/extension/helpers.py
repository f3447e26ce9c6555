"""Helpers shared by the extension's tests: running cells in the in-process shell, and a
real Jupyter kernel driven through jupyter_client."""
from __future__ import annotations

import io
import os
import queue
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(shell, cell: str) -> Any:
    """Run one cell in the in-process shell; raise its error here."""
    result = shell.run_cell(cell)
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return result.result


def run_capture(shell, cell: str) -> tuple[Any, str, str]:
    """Run one cell; return (ExecutionResult, stdout, stderr). Errors are shown, not raised
    (IPython prints tracebacks to stdout)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        result = shell.run_cell(cell)
    return result, out.getvalue(), err.getvalue()


class Kernel:
    """A real ipykernel in a subprocess: ``execute(code)`` returns the outputs and the
    reply; ``interrupt()`` sends SIGINT as Jupyter's stop button does."""

    def __init__(self, cwd: str, env: dict | None = None):
        from jupyter_client.manager import KernelManager
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd, env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def execute(self, code: str, timeout: float = 120) -> dict:
        outputs: list[dict] = []

        def hook(msg: dict) -> None:
            kind = msg["msg_type"]
            if kind in ("stream", "error", "display_data", "execute_result"):
                outputs.append({"type": kind, **msg["content"]})

        reply = self.kc.execute_interactive(code, output_hook=hook, timeout=timeout)
        return {"status": reply["content"]["status"], "reply": reply["content"],
                "outputs": outputs,
                "stdout": "".join(o.get("text", "") for o in outputs
                                  if o["type"] == "stream" and o["name"] == "stdout"),
                "stderr": "".join(o.get("text", "") for o in outputs
                                  if o["type"] == "stream" and o["name"] == "stderr")}

    def start(self, code: str) -> str:
        """Send code without waiting; returns the request's msg_id. An error in it (the
        interrupt this is used for) must not abort the requests that follow."""
        return self.kc.execute(code, stop_on_error=False)

    def wait_reply(self, msg_id: str, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError("no reply from the kernel") from None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


#: A small regression program, as a user would type it into a cell.
NET_CELL = '''
import numpy as np
class Net(fluid.Program):
    learning_rate = 0.1
    hidden = 4

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("net"):
            h = fluid.layers.fc(input=x, size=self.hidden, act="relu")
            p = fluid.layers.fc(input=h, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=p, label=y), name="cost")
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(cost)
        return cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        with fluid.var_scope("net"):
            h = fluid.layers.fc(input=x, size=self.hidden, act="relu")
            return fluid.layers.fc(input=h, size=1)
'''

DATA_CELL = '''
rng = np.random.default_rng(0)
X = rng.standard_normal((16, 3)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.25).astype("float32")
'''
