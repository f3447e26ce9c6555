"""A real browser: the fit_a_line notebook runs in JupyterLab, driven by Playwright in
Debian's headless chromium; the graphs and the widgets must render. A screenshot is kept in
tests/extension/artifacts/ (git-ignored).

Needs: jupyterlab and playwright (pip), chromium (apt; /usr/bin/chromium). Playwright's own
browser downloads are never used.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("jupyterlab")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")
sync_api = pytest.importorskip("playwright.sync_api")

from tests.extension.conftest import NOTEBOOKS  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifacts")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
TOKEN = "fluid-browser-test"
APP = "window.jupyterapp.shell.currentWidget"

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
    pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz dot is not installed"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path, kernel_env):
    """A JupyterLab server on loopback, serving a copy of the notebook."""
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(os.path.join(NOTEBOOKS, "01_fit_a_line.ipynb"), root / "fit_a_line.ipynb")
    settings = tmp_path / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
     ).write_text('{"fetchNews": "false", "checkForUpdates": false}')
    # every cell in the DOM (no virtual scrolling), so what is checked is what is drawn
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
     ).write_text('{"windowingMode": "none"}')
    port = free_port()
    env = dict(kernel_env, JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"),
               JUPYTER_DATA_DIR=str(tmp_path / "jdata"))
    env.pop("JUPYTER_PATH", None)
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={TOKEN}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         f"--LabApp.user_settings_dir={settings}",
         f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--ServerApp.open_browser=False", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"jupyter lab exited; see {log.name}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"jupyter lab did not start; see {log.name}") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", tmp_path / "server.log"
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)   # the server and the kernels it started
            server.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            server.wait(timeout=10)
        log.close()


def test_fit_a_line_in_jupyterlab(lab, tmp_path):
    url, server_log = lab
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "fit_a_line_lab.png")
    profile = tmp_path / "chromium-profile"
    console_errors = []
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 1600})
        try:
            page = ctx.new_page()
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            page.goto(f"{url}/lab/tree/fit_a_line.ipynb?token={TOKEN}",
                      wait_until="domcontentloaded")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            page.wait_for_function(
                f"window.jupyterapp && {APP} && {APP}.sessionContext"
                f" && {APP}.sessionContext.session && {APP}.sessionContext.session.kernel"
                f" && {APP}.sessionContext.session.kernel.status === 'idle'", timeout=90_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            n_code = page.evaluate(
                f"{APP}.content.model.cells.length !== undefined ? "
                f"[...Array({APP}.content.model.cells.length).keys()].filter("
                f"i => {APP}.content.model.cells.get(i).type === 'code').length : 0")
            try:
                page.wait_for_function(
                    "(n) => { const p = [...document.querySelectorAll("
                    "'.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent);"
                    " return p.length === n && p.every(t => /\\[\\d+\\]/.test(t)); }",
                    arg=n_code, timeout=180_000)
                page.wait_for_selector(".fluid-train .widget-hprogress", timeout=60_000)
                page.wait_for_selector(".fluid-train .widget-html-content svg polyline",
                                       timeout=60_000)
                page.wait_for_selector(".fluid-explorer .widget-html-content svg rect.bar",
                                       timeout=60_000)
            except Exception:
                page.screenshot(path=shot.replace(".png", "-failed.png"), full_page=True)
                raise
            found = page.evaluate("""() => ({
                graphs: [...document.querySelectorAll(
                    '.jp-OutputArea-output[data-mime-type="image/svg+xml"] img')]
                    .filter(i => i.complete && i.naturalWidth > 0).length,
                progress: document.querySelectorAll('.fluid-train .widget-hprogress').length,
                curves: document.querySelectorAll('.fluid-train svg polyline').length,
                bars: document.querySelectorAll('.fluid-explorer svg rect.bar').length,
                errors: document.querySelectorAll(
                    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]'
                    ).length,
                tables: document.querySelectorAll('table.fluid-table').length,
                widths: [...document.querySelectorAll('.fluid-train .progress-bar')]
                    .map(e => e.style.width),
                status: [...document.querySelectorAll('.fluid-train .fluid-train-status')]
                    .map(e => e.textContent),
            })""")
            page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")
            page.locator(".fluid-train").first.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            page.screenshot(path=shot, full_page=False)
        finally:
            ctx.close()
    assert found["errors"] == 0, (found, console_errors)
    assert found["graphs"] >= 4, found         # the program, two methods, Tiny, restored
    assert found["progress"] == 2 and found["curves"] == 2, found
    assert found["widths"][0] == "100%", found
    assert found["status"][0].startswith("600/600") and "end of data" in found["status"][1]
    assert found["bars"] >= 1 and found["tables"] == 3, found   # programs, vars, history
    assert os.path.getsize(shot) > 10_000
