"""What notebooks 02-07 claim, checked on a real run (nbclient), from the kernel's own
variables: a cell appended to each notebook prints them as JSON. test_notebooks.py already
checks that every notebook runs without errors and shows graphs and widgets; these tests
check the story each one tells."""
import json
import os
import shutil

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")
pytest.importorskip("sklearn")   # the digits (the `examples` extra)

from tests.extension.conftest import NOTEBOOKS  # noqa: E402

HAS_DOT = shutil.which("dot") is not None


def run(name, facts, cwd):
    """Run notebook ``name`` with ``cwd`` as its working directory, plus a last cell that
    prints the JSON of the expression ``facts``; return the executed notebook and the
    facts."""
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"import json, threading\n"
                                               f"print(json.dumps({facts}))"))
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}).execute()
    text = "".join(o.text for o in nb.cells[-1].outputs
                   if o.output_type == "stream" and o.name == "stdout")
    return nb, json.loads(text)


def outputs_of(nb, startswith):
    """The outputs of the code cells whose source starts with ``startswith``."""
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(startswith)]
    assert cells, f"no code cell starts with {startswith!r}"
    return [o for c in cells for o in c.outputs]


def stdout_of(nb, startswith):
    return "".join(o.text for o in outputs_of(nb, startswith)
                   if o.output_type == "stream" and o.name == "stdout")


def svgs_of(nb, startswith):
    return [o.data["image/svg+xml"] for o in outputs_of(nb, startswith)
            if "image/svg+xml" in o.get("data", {})]


def test_digits_story(tmp_path, kernel_env):
    """Both models learn (the MLP past 90 % test accuracy), training stops at the end of
    the reader's 10 epochs, and the notebook finds examples/ from an unrelated working
    directory."""
    nb, facts = run("02_digits.ipynb", """{
        'examples': EXAMPLES,
        'mlp': mlp_accuracy, 'cnn': cnn_accuracy,
        'mlp_run': [mlp_history.stopped, mlp_history.steps],
        'cnn_run': [cnn_history.stopped, cnn_history.steps],
        'wrong': len(wrong), 'filters': list(filters.shape),
        'workdir_left': os.path.exists(workdir)}""", tmp_path)
    assert os.path.samefile(facts["examples"], os.path.join(os.path.dirname(NOTEBOOKS),
                                                            "examples"))
    assert facts["mlp_run"] == ["end of data", 220]
    assert facts["cnn_run"] == ["end of data", 220]
    assert len(facts["mlp"]) == len(facts["cnn"]) == 10
    assert facts["mlp"][-1] > 0.9 and max(facts["mlp"]) > 0.95
    assert facts["cnn"][-1] > 0.9
    assert facts["mlp"][-1] > facts["mlp"][0] and facts["cnn"][-1] > facts["cnn"][0]
    assert facts["wrong"] == round((1 - facts["mlp"][-1]) * 359)
    assert facts["filters"] == [8, 1, 3, 3]
    assert not facts["workdir_left"]
    assert "final test accuracy" in stdout_of(nb, "for epoch, accuracy")
    if HAS_DOT:
        assert svgs_of(nb, "fluid.graph(mlp.train, collapse_grads=True)")
        assert svgs_of(nb, "fluid.graph(cnn.train, forward_only=True)")
    # the summaries count the layers' parameters; inspect shows the last watched step
    mlp_summary = "".join(o.data["text/plain"] for o in outputs_of(nb, "mlp.summary()")
                          if "text/plain" in o.get("data", {}))
    assert "mlp/" in mlp_summary and "total parameters: 17,226" in mlp_summary
    cnn_summary = "".join(o.data["text/plain"] for o in outputs_of(nb, "cnn.summary()")
                          if "text/plain" in o.get("data", {}))
    assert "non-trainable: 48" in cnn_summary     # batch norm's running statistics
    inspected = "".join(o.data.get("text/html", "") for o in outputs_of(
        nb, "%fluid inspect mlp.train") if "data" in o)
    assert "MLP.train(), call 220" in inspected and "dead units" in inspected
    assert inspected.count('class="fluid-histogram"') == 3 + 6


def test_gan_story(tmp_path, kernel_env):
    """Each training method updates only its own side, and alternating them moves the
    generated numbers from around 0 to the data's mean and spread."""
    nb, facts = run("03_gan.ipynb", """{
        'g_kept_d': g_kept_d, 'd_kept_g': d_kept_g,
        'by_g': by_g, 'by_d': by_d,
        'start': [float(snapshots[0].mean()), float(snapshots[0].std())],
        'final': [float(final.mean()), float(final.std())],
        'steps': history.steps, 'stopped': history.stopped,
        'last_d_loss': history.loss[-1]}""", tmp_path)
    assert facts["g_kept_d"] and facts["d_kept_g"]
    for name, change in facts["by_g"].items():
        assert (change > 0) == name.startswith("generator/"), (name, change)
    for name, change in facts["by_d"].items():
        assert (change > 0) == name.startswith("discriminator/"), (name, change)
    assert len(facts["by_g"]) == 8
    assert (facts["steps"], facts["stopped"]) == (2000, "finished")
    assert abs(facts["start"][0] - 3.0) > 2.0          # starts far from the data
    mean, std = facts["final"]
    assert abs(mean - 3.0) < 0.4 and 0.25 < std < 0.8   # ends on it, spread included
    assert 1.2 < facts["last_d_loss"] < 1.6             # near 2 ln 2: it cannot tell
    updates = stdout_of(nb, 'for method in ("train_d", "train_g")')
    assert "train_d updates: discriminator/" in updates and "generator/" not in \
        updates.split("train_g updates:")[0]
    if HAS_DOT:
        assert svgs_of(nb, "gan = GAN().Compile")
        assert svgs_of(nb, "def histograms_svg")


def test_distributed_story(tmp_path, kernel_env):
    """Both programs split over 2 trainers and 2 pservers train in sync to the same
    parameters as one process on the whole batch, the split is drawn with its messages,
    and close() leaves no trainer thread behind."""
    nb, facts = run("04_distributed.ipynb", """{
        'fit': [fit_param_diff, fit_loss_diff], 'mlp': [mlp_param_diff, mlp_state_diff,
        mlp_loss_diff],
        'fit_loss': [fit_history.loss[0], fit_history.loss[-1], fit_history.steps],
        'mlp_loss': [mlp_history.loss[0], mlp_history.loss[-1], mlp_history.steps],
        'accuracy': mlp_accuracy, 'closed': [dist.closed, mlp_dist.closed],
        'trainers': [plan.trainers, mlp_plan.trainers],
        'servers': [len(plan.endpoints), len(mlp_plan.endpoints)],
        'cut': [len(mlp_plan.param_blocks(p)) for p in
                ('mlp/fc_0.w_0', 'mlp/fc_1.w_0', 'mlp/fc_2.w_0')],
        'threads': [t.name for t in threading.enumerate()
                    if t.name.startswith('fluid-trainer')],
        'ray': [ray_identical, on_ray.closed, on_ray.engine,
                float(trained.infer(sample)[0, 0]), float(ray_infer[0, 0])]}""",
        tmp_path)
    assert facts["trainers"] == [2, 2] and facts["servers"] == [2, 2]
    identical, closed, engine, loaded, on_ray = facts["ray"]
    assert identical and closed and engine == "ray" and loaded == on_ray
    assert facts["cut"] == [2, 2, 1]
    assert max(facts["fit"]) < 1e-5
    assert max(facts["mlp"]) < 1e-4
    first, last, steps = facts["fit_loss"]
    assert steps == 300 and last < 0.01 * first
    first, last, steps = facts["mlp_loss"]
    assert steps == 220 and last < 0.1 * first
    assert len(facts["accuracy"]) == 10 and facts["accuracy"][-1] > 0.9
    assert facts["closed"] == [True, True] and facts["threads"] == []

    trainer_text = stdout_of(nb, "print(format_program(plan.trainer_program(0)))")
    for op in ("= send(", "= send_barrier(", "= recv(", "= fetch_barrier("):
        assert op in trainer_text, op
    assert "sgd(" not in trainer_text
    server_text = stdout_of(nb, "print(format_program(plan.pserver_program(0)))")
    assert "= sum(" in server_text and "{scale=0.5}" in server_text and "= sgd(" in server_text
    added = stdout_of(nb, "for op in mlp_plan.trainer_program(0)")
    assert "= split(" in added and "= concat(" in added
    if HAS_DOT:
        for cell in ("fluid.graph(plan)", "fluid.graph(mlp_plan,"):
            (svg,) = svgs_of(nb, cell)
            for name in ("trainer 0", "pserver 127.0.0.1:6174", "pserver 127.0.0.1:6175"):
                assert name in svg, (cell, name)
            assert "#7b3fa0" in svg   # the send/recv edges between the programs


def test_onnx_story(tmp_path, kernel_env):
    """The exported CNN runs in onnxruntime with infer's predictions, imports back to the
    same predictions, and a new last layer on the imported layers trains for one epoch."""
    pytest.importorskip("onnxruntime")
    nb, facts = run("05_onnx.ipynb", """{
        'ort': same_as_onnxruntime, 'round_trip': round_trip_equal,
        'accuracy': accuracy, 'tuned': tuned_accuracy,
        'tune_run': [tune_history.stopped, tune_history.steps],
        'head': sorted(n for n in tuned.parameters() if n.startswith('head/')),
        'workdir_left': os.path.exists(workdir)}""", tmp_path)
    assert facts["ort"] and facts["round_trip"]
    assert facts["accuracy"] > 0.8 and facts["tuned"] > 0.8
    assert facts["tune_run"] == ["end of data", 23]
    assert facts["head"] == ["head/fc_0.b_0", "head/fc_0.w_0"]
    assert not facts["workdir_left"]
    assert "exported in" in stdout_of(nb, "path = os.path.join")
    if HAS_DOT:
        assert svgs_of(nb, "fluid.graph(net.infer)")


def test_control_flow_story(tmp_path, kernel_env):
    """The LSTM written in a StaticRNN learns the adding problem at T=20 and runs at T=40
    with the same step function; the drawing shows the loop as a box that opens into its
    step; watching the step's gates keeps their value of every step, which inspect shows
    per step, the gradient reaching every step once trained and fading in a fresh LSTM;
    Newton's While runs a data-dependent number of iterations and its gradient is
    1/(2 sqrt a); the sources show real loops."""
    nb, facts = run("07_control_flow.ipynb", """{
        'mse_20': mse_20, 'steps': history.steps,
        'trips': [trips[a] for a in (2.0, 100.0, 1e6)],
        'grads': [float(newton.sqrt(np.array([a]))[2]) for a in (2.0, 100.0, 1e6)],
        'functions': re.findall(r"^def (\\w+)", lstm.test_mse.source, flags=re.M),
        'plans': [(p.inputs[0], p.functions) for p in lstm.test_mse.plans],
        'watched': {n: list(v.shape) for n, v in lstm.train_step.watched.items()},
        'norms': {k: [float(x) for x in v] for k, v in norms.items()}}""", tmp_path)
    assert facts["steps"] == 800 and facts["mse_20"] < (1 / 6) / 20
    assert len(set(facts["trips"])) == 3 and facts["trips"] == sorted(facts["trips"])
    for a, grad in zip((2.0, 100.0, 1e6), facts["grads"]):
        assert abs(grad - 0.5 / a ** 0.5) < 1e-6
    assert facts["functions"][0] == "test_mse" and len(facts["functions"]) == 2
    # one signature, any T (a dim declared -1), one generated function for T=20 and T=40
    assert len(facts["plans"]) == 1 and facts["plans"][0][1] == 1
    assert -1 in facts["plans"][0][0]
    loop_lines = stdout_of(nb, 'print("\\n".join(line for line in re.sub')
    assert "while " in loop_lines and "for " in loop_lines
    assert "fluid.layers.cond(pred" in stdout_of(nb, "class Branchy")
    per_step = [shape for shape in facts["watched"].values() if len(shape) == 3]
    assert per_step and all(shape[0] == 20 for shape in per_step)     # [T, batch, ...]
    # the gradient at the gates, per step: even across the steps once trained; fading
    # going back from the loss in a fresh LSTM
    trained, fresh = facts["norms"]["trained"], facts["norms"]["fresh"]
    assert len(trained) == len(fresh) == 20
    assert min(trained) > 0.4 and fresh[-1] == 1.0 and fresh[0] < 0.1
    page = "".join(o.data["text/html"] for o in outputs_of(nb, "%fluid inspect lstm")
                   if "text/html" in o.get("data", {}))
    assert "one value per iteration of <b>lstm/static_rnn_0</b>: the first dim (20) is the " \
        "iteration" in page
    assert page.count('class="fluid-iteration"') == 8 and "every iteration (20)" in page
    if HAS_DOT:
        drawn = outputs_of(nb, "fluid.graph(lstm.train_step)")
        svg = next(o.data["image/svg+xml"] for o in drawn if "image/svg+xml" in o.data)
        page = next(o.data["text/html"] for o in drawn if "text/html" in o.data)
        assert "<title>sb2</title>" in svg and "<title>sb3</title>" in svg  # step, gradient
        assert 'data-node="sb2"' in page and 'data-node="sb3"' in page      # what they open
