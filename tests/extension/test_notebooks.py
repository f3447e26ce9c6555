"""Every notebook in notebooks/ runs top to bottom in a real kernel (nbclient), with no
errors, and shows SVG graphs and widgets."""
import glob
import json
import os
import shutil
import subprocess

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")

from tests.extension.conftest import NOTEBOOKS  # noqa: E402

PATHS = sorted(glob.glob(os.path.join(NOTEBOOKS, "*.ipynb")))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def test_there_are_notebooks():
    assert PATHS, f"no notebooks in {NOTEBOOKS}"


def _committed(path: str):
    """The notebook as git stores it (the index's copy), else the file: a notebook a user
    ran and Jupyter autosaved in their clone is theirs to keep or discard."""
    rel = os.path.relpath(path, os.path.dirname(NOTEBOOKS))
    try:
        shown = subprocess.run(["git", "show", f":{rel}"], cwd=os.path.dirname(NOTEBOOKS),
                               capture_output=True, text=True, timeout=60)
    except OSError:
        shown = None
    if shown is not None and shown.returncode == 0:
        return nbformat.reads(shown.stdout, as_version=4)
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", PATHS, ids=[os.path.basename(p) for p in PATHS])
def test_stored_without_outputs(path):
    nb = _committed(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert nb.metadata.kernelspec.name == "python3"   # Lab opens it without asking
    assert "widgets" not in nb.metadata


@pytest.mark.parametrize("path", PATHS, ids=[os.path.basename(p) for p in PATHS])
def test_runs_top_to_bottom(path, tmp_path, kernel_env):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}},
                                     store_widget_state=True)
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, [(o.ename, o.evalue) for o in errors]
    stderr = "".join(o.text for o in outputs if o.output_type == "stream" and
                     o.name == "stderr" and "Kernel is running over TCP" not in o.text)
    assert "Traceback" not in stderr and "could not recompile" not in stderr, stderr
    mimes = [m for o in outputs for m in o.get("data", {})]
    if shutil.which("dot"):
        svgs = [o.data["image/svg+xml"] for o in outputs if "image/svg+xml" in o.get("data", {})]
        assert svgs and all("<svg" in s for s in svgs)
    else:
        hints = [o.data["text/plain"] for o in outputs
                 if "install graphviz" in o.get("data", {}).get("text/plain", "")]
        assert hints
    assert WIDGET_VIEW in mimes
    state = nb.metadata.widgets[WIDGET_STATE]["state"]
    classes = {m["model_name"] for m in state.values()}
    assert {"IntProgressModel", "HTMLModel", "VBoxModel"} <= classes
    (tmp_path / "executed.ipynb").write_text(json.dumps(nb))


def test_fit_a_line_story(tmp_path, kernel_env):
    """The tutorial's own claims: training converges, the loop stops at the end of the
    data, the edit keeps the weights, and save/load round-trips."""
    path = os.path.join(NOTEBOOKS, "01_fit_a_line.ipynb")
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json\n"
        "w = fit_a_line.get_var('prediction/fc_0.w_0')\n"
        "print(json.dumps({'w_err': float(abs(w - TRUE_W).max()),\n"
        "                  'stopped': history.stopped, 'steps': history.steps,\n"
        "                  'methods': list(fit_a_line.methods),\n"
        "                  'live': len(fluid.live.live_programs())}))"))
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = {i: "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
             for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    result = json.loads(texts[len(nb.cells) - 1])
    assert result["w_err"] < 0.05
    assert (result["stopped"], result["steps"]) == ("end of data", 300)
    assert result["methods"] == ["train_step", "infer", "evaluate"]
    report = next(t for t in texts.values() if "recompiled fit_a_line" in t)
    assert "kept 4" in report and "added 0" in report and "dropped 0" in report
    shown = {i: "".join(o.get("data", {}).get("text/plain", "") for o in c.outputs)
             for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    edit = next(t for t in shown.values() if "what changed in fit_a_line" in t)
    assert "  evaluate: new method" in edit and "unchanged methods: train_step, infer" in edit
    assert len(edit.splitlines()) <= 6, edit
    diff = next(t for t in shown.values() if t.startswith("diff FitALine"))
    assert "  reader_0: starts again: its initialiser's batch_size changed from 256 to 64" \
        in diff.splitlines()
    rewound = next(t for t in texts.values() if "rewound fit_a_line" in t)
    assert rewound.startswith("fluid: rewound fit_a_line by 12 change(s) (train_step x10, "
                              "set_var learning_rate_0, reset_readers)")
    assert "reader_0 is back at batch 1000" in rewound
    table = next(t for t in shown.values() if "fit_a_line: history on" in t)
    assert "set_var learning_rate_0" in table
