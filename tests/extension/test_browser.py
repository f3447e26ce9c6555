"""A real browser: every notebook runs in JupyterLab, driven by Playwright in Debian's
headless chromium at a 1280 px window, and so does a notebook of drawings of real models (a
three-layer MLP with Adam, the digits MLP split over 2 trainers and 2 parameter servers,
the differences two edits of the MLP make: a hidden layer 64 -> 48 wide, relu -> tanh, and
a loop in a loop).

For every drawing a notebook shows, the test measures what a reader sees: the drawing is no
wider than the cell's output area (no horizontal scrolling) and every node label is at least
9 px tall on screen. A cell that raised fails the test: JupyterLab 4 renders an error as a
``application/vnd.jupyter.stderr`` output like any stderr text, so errors are counted in
the notebook's model (outputs of type ``error``); a notebook whose last cell raises checks
that this count sees it. A loop's box opens on click into its body, and a loop inside that
body into its own; the backward pass and a gradient block open into the gradient of each
layer, and a layer's box there into its ops: each drawing a box opens into is measured by
the same rules, with node labels at least 10.5 px tall. Screenshots of every drawing,
and ``graphs.json`` with the measurements, are kept in tests/extension/artifacts/
(git-ignored).

Needs: jupyterlab and playwright (pip), chromium (apt; /usr/bin/chromium). Playwright's own
browser downloads are never used.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("jupyterlab")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")
sync_api = pytest.importorskip("playwright.sync_api")

from tests.extension.conftest import NOTEBOOKS, ROOT, kernel_pythonpath  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifacts")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
TOKEN = "fluid-browser-test"
APP = "window.jupyterapp.shell.currentWidget"
WINDOW = {"width": 1280, "height": 1000}
MIN_LABEL_PX = 9.0
#: What every drawing a box opens into keeps, as the notebooks' own drawings do (the
#: opened gradient block of notebook 07's hand-written LSTM cell had 10.4 px labels, its
#: backward pass 4.1 px, before they were drawn by layer; docs/graphs.md).
OPENED_MIN_LABEL_PX = 10.5
PROJECT = sorted(os.path.basename(p) for p in glob.glob(os.path.join(NOTEBOOKS, "*.ipynb")))

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
    pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz dot is not installed"),
]

# --- notebooks made by the test ----------------------------------------------------------------

with open(os.path.join(ROOT, "tests", "render", "models.py"), encoding="utf-8") as _fh:
    MODELS = "%load_ext fluid\n" + _fh.read()
with open(os.path.join(ROOT, "tests", "render", "loops.py"), encoding="utf-8") as _fh:
    MODELS += "\n\n" + _fh.read()

GRAPH_CELLS = [
    MODELS,
    "mlp3 = MLP3().Compile(seed=0)\nmlp3",
    "fluid.graph(mlp3.train_step)",
    "plan = fluid.transpile(DigitsMLP().Compile(seed=0), main='train', trainers=2,\n"
    "                       pservers=2, min_block_size=1024)\nfluid.graph(plan)",
    "fluid.diff(MLP3, MLP3(hidden=48))",
    "fluid.diff(mlp3, MLP3(act='tanh'))",
    "nested = NestedLoops().Compile(seed=0)\nfluid.graph(nested.train_step)",
]
GRAPH_TITLES = ["MLP3", "MLP3.train_step", "distributed plan", "MLP3 (a) → MLP3 (b)",
                "MLP3 (a) → MLP3 (b)", "NestedLoops.train_step"]

FAILING_CELLS = ["x = 1", "print('fine so far')", "raise ValueError('a deliberately failing cell')"]


def write_notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, str(path))


# --- a JupyterLab server and a browser, for the whole module ------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback, serving copies of the notebooks."""
    tmp_path = tmp_path_factory.mktemp("lab")
    root = tmp_path / "root"
    root.mkdir()
    for name in PROJECT:
        shutil.copy(os.path.join(NOTEBOOKS, name), root / name)
    write_notebook(root / "graphs.ipynb", GRAPH_CELLS)
    write_notebook(root / "failing.ipynb", FAILING_CELLS)
    settings = tmp_path / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
     ).write_text('{"fetchNews": "false", "checkForUpdates": false}')
    # every cell in the DOM (no virtual scrolling), so what is checked is what is drawn
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
     ).write_text('{"windowingMode": "none"}')
    port = free_port()
    env = dict(os.environ, PYTHONPATH=kernel_pythonpath(), FLUID_DEVICE="cpu",
               PYDEVD_DISABLE_FILE_VALIDATION="1",
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"), JUPYTER_DATA_DIR=str(tmp_path / "jdata"))
    env.pop("JUPYTER_PATH", None)
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 (the server process keeps it)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={TOKEN}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         f"--LabApp.user_settings_dir={settings}",
         f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--ServerApp.open_browser=False", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(root), start_new_session=True)
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
        yield f"http://127.0.0.1:{port}"
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


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    os.makedirs(ARTIFACTS, exist_ok=True)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport=WINDOW)
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def measurements():
    """Every drawing measured in this module, written to artifacts/graphs.json at the end."""
    found: dict = {}
    yield found
    with open(os.path.join(ARTIFACTS, "graphs.json"), "w") as fh:
        json.dump(found, fh, indent=1)


# --- driving one notebook ----------------------------------------------------------------------

def run_notebook(ctx, url, name):
    """Open ``name``, run all cells, wait until the kernel is done; return the page."""
    page = ctx.new_page()
    page.goto(f"{url}/lab/tree/{name}?reset&token={TOKEN}", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_function(
        f"window.jupyterapp && {APP} && {APP}.sessionContext"
        f" && {APP}.sessionContext.session && {APP}.sessionContext.session.kernel"
        f" && {APP}.sessionContext.session.kernel.status === 'idle'", timeout=90_000)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    # done: no cell queued or running ([*]), the kernel idle, and every code cell run or
    # the run stopped at an error
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                .map(e => e.textContent);
            if (prompts.some(t => t.includes('*'))) return false;
            if (w.sessionContext.session.kernel.status !== 'idle') return false;
            return prompts.every(t => /\\[\\d+\\]/.test(t)) || errorCount(w) > 0;
            function errorCount(w) {
                let n = 0;
                for (let i = 0; i < w.content.model.cells.length; i++) {
                    const c = w.content.model.cells.get(i);
                    if (c.type !== 'code') continue;
                    for (let k = 0; k < c.outputs.length; k++)
                        if (c.outputs.get(k).type === 'error') n++;
                }
                return n;
            }
        }""", timeout=240_000, polling=500)
    page.wait_for_timeout(800)     # late display updates (widgets, scripts)
    return page


def cell_errors(page):
    """Every output of type 'error' in the notebook's model: (cell index, ename, evalue)."""
    return page.evaluate(f"""() => {{
        const w = {APP}, out = [];
        for (let i = 0; i < w.content.model.cells.length; i++) {{
            const c = w.content.model.cells.get(i);
            if (c.type !== 'code') continue;
            for (let k = 0; k < c.outputs.length; k++) {{
                const o = c.outputs.get(k).toJSON();
                if (o.output_type === 'error') out.push([i, o.ename, o.evalue]);
            }}
        }}
        return out;
    }}""")


MEASURE = """() => [...document.querySelectorAll('.jp-OutputArea-output .fluid-graph')]
    .map((g, k) => {
        const area = g.closest('.jp-OutputArea-output');
        const view = g.querySelector('.fluid-graph-view');
        const title = g.querySelector('.fluid-graph-title');
        if (!view) return {index: k, error: g.textContent.slice(0, 300)};
        const svg = view.querySelector('svg');
        const sizes = [...svg.querySelectorAll('g.node text')]
            .map(t => parseFloat(t.getAttribute('font-size')) * t.getScreenCTM().a);
        return {
            index: k,
            title: title ? title.textContent : '',
            natural: parseFloat(svg.getAttribute('width')),
            width: svg.getBoundingClientRect().width,
            area: area.getBoundingClientRect().width,
            area_scrolls: area.scrollWidth > area.clientWidth + 1,
            view_scrolls: view.scrollWidth > view.clientWidth + 1,
            min_label_px: Math.min(...sizes),
            labels: sizes.length,
            cell: [...document.querySelectorAll('.jp-Notebook .jp-Cell')]
                .indexOf(g.closest('.jp-Cell')),
        };
    })"""


def measure_graphs(page, name, found):
    """Measure every drawing at the 1280 px window, then screenshot each in a window tall
    enough to hold it (JupyterLab scrolls inside its panel, not the page)."""
    graphs = page.evaluate(MEASURE)
    stem = name.replace(".ipynb", "")
    for g in graphs:
        found[f"{stem}#{g['index']}"] = g
        drawing = page.locator(".jp-OutputArea-output .fluid-graph").nth(g["index"])
        height = drawing.bounding_box()["height"]
        page.set_viewport_size({"width": WINDOW["width"],
                                "height": int(min(max(WINDOW["height"], height + 200), 6000))})
        drawing.scroll_into_view_if_needed()
        drawing.screenshot(path=os.path.join(ARTIFACTS, f"{stem}-graph-{g['index']}.png"))
    page.set_viewport_size(WINDOW)
    return graphs


def close(page):
    page.evaluate(f"""async () => {{
        const w = {APP};
        if (w && w.sessionContext) await w.sessionContext.shutdown();
    }}""")
    page.close()


def assert_readable(graphs):
    for g in graphs:
        assert "error" not in g, g                      # graphviz drew it
        assert g["width"] <= g["area"] + 0.5, g         # fits the output area
        assert not g["area_scrolls"] and not g["view_scrolls"], g
        assert g["labels"] > 0 and g["min_label_px"] >= MIN_LABEL_PX, g


# --- the tests ---------------------------------------------------------------------------------

def test_the_error_check_sees_a_failing_cell(lab, browser):
    """JupyterLab shows the error as stderr text; the check counts it from the model."""
    page = run_notebook(browser, lab, "failing.ipynb")
    try:
        errors = cell_errors(page)
        mimes = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output')]
            .map(e => e.getAttribute('data-mime-type'))""")
    finally:
        close(page)
    assert errors == [[2, "ValueError", "a deliberately failing cell"]]
    assert "application/vnd.jupyter.stderr" in mimes
    assert "application/vnd.jupyter.error" not in mimes     # why a DOM count misses it


@pytest.mark.parametrize("name", PROJECT + ["graphs.ipynb"])
def test_notebook_runs_and_its_drawings_read_at_cell_size(lab, browser, measurements, name):
    page = run_notebook(browser, lab, name)
    try:
        errors = cell_errors(page)
        graphs = measure_graphs(page, name, measurements)
        extra = _notebook_checks(page, name)
    finally:
        close(page)
    stem = name.replace(".ipynb", "")
    for opened in extra.get("loops", []):
        measurements[f"{stem}:{opened['node']} opened"] = opened
    if "inspect" in extra:
        measurements[f"{stem}:inspect"] = extra["inspect"]
    assert errors == [], errors
    assert graphs, f"{name} shows no drawing"
    assert_readable(graphs)
    if name == "graphs.ipynb":
        titles = [g["title"] for g in graphs]
        assert titles == GRAPH_TITLES, titles
        split = graphs[2]
        assert split["natural"] < 1400, split     # the op-level split was 30,332 px wide
        assert extra["zoom"]["full"] >= split["natural"] - 1, extra
        assert extra["zoom"]["fit"] <= split["area"] + 0.5, extra
        # the diffs by layer: drawn at full size (the 64 -> 48 one was 8,629 px wide by op,
        # shown at 10 % with 1.2 px labels), a few lines of text, every op one click away
        for diff in graphs[3:5]:
            assert diff["natural"] <= diff["area"] + 0.5, diff
            assert diff["min_label_px"] >= 12, diff
        assert [len(t.splitlines()) for t in extra["diff_text"]] == [5, 6], extra
        assert extra["diff_text"][0].splitlines()[1] == (
            "  mlp/fc_1 (fc): size 64 → 48; re-initialised w_0, b_0 with their adam state")
        assert extra["ops_lines"][0] > 90, extra      # the op-level text, on demand
        assert extra["opened"]["layer_svg"] and extra["opened"]["ops_shown"], extra
        # the outer loop's box opens its body; the inner loop's box, in that body, its own
        outer, inner = extra["loops"]
        assert outer["node"] == "sb2" and inner["node"] == "sb3", extra["loops"]
        assert_opened_readable(extra["loops"])
    if name == "07_control_flow.ipynb":
        step, gradient, backward, fc_gradient = extra["loops"]
        assert step["label"] == "static_rnn_0 (recurrent): body", step
        assert gradient["label"] == "static_rnn_0 (recurrent_grad): gradient block", gradient
        assert backward["label"] == "train_step: backward pass", backward
        assert fc_gradient["label"] == ("static_rnn_0 (recurrent_grad): gradient block › "
                                        "lstm/fc_0 gradient"), fc_gradient
        assert_opened_readable(extra["loops"])
        inspect = extra["inspect"]
        assert inspect["strip"] == 8 and inspect["charts"] == 2, inspect
        assert "the first dim (20) is the iteration" in inspect["text"], inspect
        assert inspect["width"] <= inspect["area"] + 0.5 and not inspect["scrolls"], inspect
    if name == "01_fit_a_line.ipynb":
        assert extra["progress"] == 2 and extra["curves"] == 2, extra
        assert extra["lines"] == 4, extra          # raw and smoothed loss in each curve
        assert all(shown for _, shown in extra["titles"]), extra    # titles are not cut
        assert extra["widths"][0] == "100%", extra
        assert extra["status"][0].startswith("600/600"), extra
        assert "end of data" in extra["status"][1], extra
        assert extra["bars"] >= 1 and extra["tables"] == 3, extra   # programs, vars, history


def _notebook_checks(page, name):
    """What else a notebook must show: widgets for fit_a_line, working zoom buttons on the
    split drawing, loops that open on click, values per iteration."""
    if name == "07_control_flow.ipynb":
        drawing = page.locator(".jp-OutputArea-output .fluid-graph",
                               has=page.locator("svg g.node title", has_text="sb2")).first
        loops = [open_box(drawing, drawing, "sb2", "07-step-opened"),
                 open_box(drawing, drawing, "sb3", "07-step-gradient-opened")]
        backward = node_with(drawing, "^backward ", ".fluid-graph-view svg")
        loops.append(open_box(drawing, drawing, backward, "07-backward-pass-opened"))
        # a box inside the opened gradient block: the gates' fc, its gradient op by op
        block = drawing.locator('.fluid-graph-layer[data-node="sb3"]')
        loops.append(open_box(drawing, block, node_with(block, r"^fc_0\s+gradient"),
                              "07-step-gradient-fc-opened"))
        return {"loops": loops, "inspect": _inspect_checks(page)}
    if name == "graphs.ipynb":
        split = page.locator(".jp-OutputArea-output .fluid-graph").nth(2)
        split.locator("button[data-act=full]").click()
        full = split.locator(".fluid-graph-view svg").bounding_box()["width"]
        split.screenshot(path=os.path.join(ARTIFACTS, "graphs-split-zoomed.png"))
        split.locator("button[data-act=fit]").click()
        fit = split.locator(".fluid-graph-view svg").bounding_box()["width"]
        nested = page.locator(".jp-OutputArea-output .fluid-graph").nth(5)
        outer = open_box(nested, nested, "sb2", "graphs-loop-opened")
        body = nested.locator('.fluid-graph-layer[data-node="sb2"]')
        inner = open_box(nested, body, "sb3", "graphs-inner-loop-opened")
        return {"zoom": {"full": full, "fit": fit}, **_diff_checks(page),
                "loops": [outer, inner]}
    if name == "01_fit_a_line.ipynb":
        page.wait_for_selector(".fluid-train .widget-hprogress", timeout=60_000)
        page.wait_for_selector(".fluid-train .widget-html-content svg polyline",
                               timeout=60_000)
        page.wait_for_selector(".fluid-explorer .widget-html-content svg rect.bar",
                               timeout=60_000)
        found = page.evaluate("""() => ({
            progress: document.querySelectorAll('.fluid-train .widget-hprogress').length,
            curves: document.querySelectorAll('.fluid-train svg.fluid-loss-curve').length,
            lines: document.querySelectorAll('.fluid-train svg polyline').length,
            titles: [...document.querySelectorAll('.fluid-train .fluid-train-title')]
                .map(e => [e.textContent, e.scrollWidth <= e.clientWidth + 1]),
            bars: document.querySelectorAll('.fluid-explorer svg rect.bar').length,
            tables: document.querySelectorAll('table.fluid-table').length,
            widths: [...document.querySelectorAll('.fluid-train .progress-bar')]
                .map(e => e.style.width),
            status: [...document.querySelectorAll('.fluid-train .fluid-train-status')]
                .map(e => e.textContent),
        })""")
        page.locator(".fluid-train").first.scroll_into_view_if_needed()
        page.screenshot(path=os.path.join(ARTIFACTS, "fit_a_line_lab.png"))
        return found
    return {}


OPENED = """d => {
    const svg = d.querySelector('svg'), area = d.closest('.jp-OutputArea-output');
    if (!d.open || !svg) return {open: d.open, svg: !!svg};
    const sizes = [...svg.querySelectorAll('g.node text')]
        .map(t => parseFloat(t.getAttribute('font-size')) * t.getScreenCTM().a);
    return {open: true, svg: true, label: d.querySelector('summary').textContent,
            natural: parseFloat(svg.getAttribute('width')),
            width: svg.getBoundingClientRect().width,
            area: area.getBoundingClientRect().width,
            area_scrolls: area.scrollWidth > area.clientWidth + 1,
            min_label_px: Math.min(...sizes), labels: sizes.length};
}"""


def open_box(drawing, where, node, shot):
    """Click the box ``node`` inside ``where`` (the cell's drawing, or a body opened under
    it); return what opened under ``drawing``, measured, with a screenshot."""
    where.locator(f"xpath=.//*[local-name()='g'][contains(@class, 'node')]"
                  f"[*[local-name()='title'][normalize-space(.)='{node}']]").first.click()
    opened = drawing.locator(f'.fluid-graph-layer[data-node="{node}"]')
    opened.locator("svg").wait_for(state="visible", timeout=10_000)
    found = {"node": node, **opened.evaluate(OPENED)}
    opened.screenshot(path=os.path.join(ARTIFACTS, f"{shot}.png"))
    return found


def node_with(where, pattern, svg="svg"):
    """The id (title) of the first box of the drawing (``svg``, a selector) in ``where``
    whose text (its lines joined by spaces) matches the regular expression ``pattern``."""
    return where.evaluate("""(w, [pattern, svg]) => {
        const drawing = w.querySelector(svg), re = new RegExp(pattern);
        const node = [...drawing.querySelectorAll('g.node')].find(g => re.test(
            [...g.querySelectorAll('text')].map(t => t.textContent.trim()).join(' ')));
        return node.querySelector('title').textContent;
    }""", [pattern, svg])


def assert_opened_readable(opened):
    for o in opened:
        assert o["open"] and o["svg"], o
        assert o["width"] <= o["area"] + 0.5 and not o["area_scrolls"], o
        assert o["labels"] > 0 and o["min_label_px"] >= OPENED_MIN_LABEL_PX, o


def _inspect_checks(page):
    """The per-iteration view of %fluid inspect: its strip, its charts, its width."""
    view = page.locator(".jp-OutputArea-output .fluid-inspect").first
    view.scroll_into_view_if_needed()
    view.screenshot(path=os.path.join(ARTIFACTS, "07-inspect-per-iteration.png"))
    return view.evaluate("""v => ({
        strip: v.querySelectorAll('.fluid-iteration').length,
        charts: v.querySelectorAll('svg.fluid-iteration-chart').length,
        text: v.querySelector('.fluid-per-iteration').textContent,
        width: v.getBoundingClientRect().width,
        area: v.closest('.jp-OutputArea-output').getBoundingClientRect().width,
        scrolls: v.closest('.jp-OutputArea-output').scrollWidth
            > v.closest('.jp-OutputArea-output').clientWidth + 1,
    })""")


def _diff_checks(page):
    """The diffs' text, and what a click opens: a changed layer op by op (clicking its box),
    every op as text (its <details>)."""
    diffs = page.locator(".jp-OutputArea-output .fluid-diff")
    found = page.evaluate("""() => [...document.querySelectorAll('.fluid-diff')].map(d => ({
        text: d.querySelector(':scope > pre').textContent,
        ops: d.querySelector('.fluid-diff-ops pre').textContent.split('\\n').length,
    }))""")
    first = diffs.nth(0)
    first.locator(".fluid-graph-view svg g.node", has_text="fc_1").first.click()
    layer = first.locator('.fluid-graph-layer[data-node="e0"]')
    layer_svg = layer.evaluate("d => d.open && !!d.querySelector('svg')")
    first.locator(".fluid-diff-ops summary").click()
    ops_shown = first.locator(".fluid-diff-ops pre").is_visible()
    first.screenshot(path=os.path.join(ARTIFACTS, "graphs-diff-opened.png"))
    return {"diff_text": [f["text"] for f in found], "ops_lines": [f["ops"] for f in found],
            "opened": {"layer_svg": layer_svg, "ops_shown": ops_shown}}


def test_without_javascript_a_drawing_is_a_static_fitted_svg(browser, tmp_path, kernel_env):
    """A notebook rendered to HTML where no script runs (a website): the drawing still fits
    the page's width, and the zoom buttons (which need JavaScript) stay hidden."""
    import nbclient
    path = tmp_path / "graphs.ipynb"
    write_notebook(path, GRAPH_CELLS)
    nb = nbformat.read(str(path), as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    body = "".join(o["data"]["text/html"] for c in nb.cells for o in c.outputs
                   if "text/html" in o.get("data", {}))
    page_html = tmp_path / "static.html"
    page_html.write_text(f'<html><body style="margin:0"><div style="width:900px">{body}'
                         f"</div></body></html>")
    page = browser.new_page()
    try:
        browser.new_cdp_session(page).send("Emulation.setScriptExecutionDisabled",
                                           {"value": True})
        page.goto(page_html.as_uri())
        found = page.evaluate("""() => [...document.querySelectorAll('.fluid-graph')].map(g => ({
            width: g.querySelector('.fluid-graph-view svg').getBoundingClientRect().width,
            natural: parseFloat(g.querySelector('.fluid-graph-view svg').getAttribute('width')),
            controls: getComputedStyle(g.querySelector('.fluid-graph-controls')).display,
        }))""")
        page.screenshot(path=os.path.join(ARTIFACTS, "graphs-static.png"), full_page=False)
    finally:
        page.close()
    assert len(found) == len(GRAPH_TITLES)
    for g in found:
        assert g["width"] <= min(900, g["natural"]) + 0.5 and g["controls"] == "none", g
    assert re.search(r"fluid-graph-layers", body)       # expandable without a script too
