"""fluid.train: stops cleanly (end of steps, end of data, EOFException, Ctrl-C), returns the
history, and redraws its display at most ~10 times a second."""
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import fluid
from fluid import training
from fluid.training import History, loss_curve_svg, train


class Net(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(
            input=fluid.layers.fc(input=x, size=1), label=y), name="cost")
        fluid.optimizer.SGD(learning_rate=0.1).minimize(cost)
        return cost


@pytest.fixture
def data(rng):
    x = rng.standard_normal((32, 3)).astype("float32")
    return x, (x @ np.array([[1.0], [2.0], [-1.0]], "float32")).astype("float32")


def test_trains_and_returns_the_history(data, capsys):
    net = Net().Compile(seed=0)
    history = train(net.train_step, steps=200, data=lambda step: data, progress="text")
    assert isinstance(history, History)
    assert history.steps == 200 and history.requested == 200
    assert history.stopped == "finished"
    assert len(history.loss) == 200 and history.loss[-1] < history.loss[0] * 1e-2
    assert "train_step: 200/200" in capsys.readouterr().out
    assert "200/200 steps, finished" in repr(history)
    assert "<polyline" in history.plot()._repr_svg_()


def test_same_parameters_as_a_plain_loop(data):
    a, b = Net().Compile(seed=3), Net().Compile(seed=3)
    train(a.train_step, steps=25, data=[data] * 25, progress=False)
    for _ in range(25):
        b.train_step(*data)
    for name, value in a.parameters().items():
        np.testing.assert_array_equal(value, b.parameters()[name])


def test_data_forms_and_end_of_data(data):
    net = Net().Compile(seed=0)
    h = train(net.train_step, steps=10, data=iter([data] * 4), progress=False)
    assert (h.steps, h.stopped) == (4, "end of data")
    h = train(net.train_step, steps=3, data=[{"x": data[0], "y": data[1]}] * 3, progress=False)
    assert h.steps == 3
    single = []
    h = train(lambda batch: single.append(batch) or 1.0, steps=2, data=[7, 8], progress=False)
    assert single == [7, 8]


def test_eof_exception_stops_cleanly():
    calls = []

    def step():
        calls.append(1)
        if len(calls) == 6:
            raise fluid.EOFException("the reader is at the end of its data")
        return 1.0 / len(calls)

    h = train(step, steps=100, progress=False)
    assert (h.steps, h.stopped, len(h.loss)) == (5, "end of data", 5)


def test_keyboard_interrupt_returns_the_completed_steps(data):
    net = Net().Compile(seed=0)
    calls = []

    def step(x, y):
        calls.append(1)
        if len(calls) == 8:
            raise KeyboardInterrupt
        return net.train_step(x, y)

    h = train(step, steps=100, data=lambda s: data, progress=False)
    assert (h.steps, h.stopped) == (7, "interrupted")
    replay = Net().Compile(seed=0)
    for _ in range(7):
        replay.train_step(*data)
    for name, value in net.parameters().items():
        np.testing.assert_array_equal(value, replay.parameters()[name])


@pytest.mark.skipif(os.name != "posix", reason="needs SIGINT")
def test_sigint_between_steps_waits_for_the_step_boundary():
    def after(step, result):
        if step == 3:                                   # train's bookkeeping, not a step
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)                            # the handler runs here: no raise

    h = train(lambda: 0.5, steps=50, progress=False, callback=after)
    assert (h.steps, h.stopped, len(h.loss)) == (4, "interrupted", 4)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.skipif(os.name != "posix", reason="needs SIGINT")
def test_sigint_inside_a_step_lets_the_step_finish():
    calls = []

    def step():
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)                            # the handler runs: no raise
        return 0.5

    h = train(step, steps=50, progress=False)
    assert (h.steps, h.stopped, len(calls)) == (3, "interrupted", 3)


@pytest.mark.skipif(os.name != "posix", reason="needs SIGINT")
def test_a_second_sigint_stops_inside_the_step(data):
    net = Net().Compile(seed=0)
    calls = []

    def step(x, y):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGINT)         # impatient: raises here
            time.sleep(0.05)
        return net.train_step(x, y)

    h = train(step, steps=50, data=lambda s: data, progress=False)
    assert (h.steps, h.stopped) == (2, "interrupted")
    replay = Net().Compile(seed=0)
    for _ in range(2):
        replay.train_step(*data)
    for name, value in net.parameters().items():
        np.testing.assert_array_equal(value, replay.parameters()[name])


def test_other_errors_propagate_and_close_the_display(data):
    def step():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        train(step, steps=5, progress=False)


def test_callback_can_stop(data):
    h = train(lambda: 2.0, steps=50, progress=False, callback=lambda s, r: s < 9)
    assert (h.steps, h.stopped) == (10, "stopped by callback")


@pytest.mark.parametrize("result, pick, want", [
    (1.5, None, 1.5),
    (np.float32(2.5), None, 2.5),
    (np.array([[3.0]]), None, 3.0),
    ((4.0, np.zeros(3)), None, 4.0),
    ({"acc": np.zeros(2), "avg_cost": 5.0}, None, 5.0),
    ({"a": 6.0, "b": 7.0}, "b", 7.0),
    ((np.zeros(2), 8.0), 1, 8.0),
    ({"z": 9.0}, lambda r: r["z"] * 2, 18.0),
    (np.zeros(3), None, None),
])
def test_loss_is_found(result, pick, want):
    h = train(lambda: result, steps=1, loss=pick, progress=False)
    assert h.loss == ([] if want is None else [want])


def test_bad_arguments():
    with pytest.raises(TypeError, match="callable"):
        train(3, steps=1)
    with pytest.raises(ValueError, match="non-negative"):
        train(lambda: 1.0, steps=-1)
    with pytest.raises(TypeError, match="data must be"):
        train(lambda: 1.0, steps=1, data=3)
    with pytest.raises(ValueError, match="progress must be"):
        train(lambda: 1.0, steps=1, progress="fancy")


def test_redraws_are_throttled(monkeypatch):
    views = []
    real = training._TextView

    class Counting(real):
        def __init__(self, *a):
            super().__init__(*a)
            views.append(self)

    monkeypatch.setitem(training.__dict__, "_TextView", Counting)
    started = time.perf_counter()

    def step():
        time.sleep(0.0005)
        return 1.0

    train(step, steps=600, progress="text")
    elapsed = time.perf_counter() - started
    (view,) = views
    assert view.renders <= elapsed / training.REFRESH_SECONDS + 3
    assert view.renders >= 2                                # the first and the final


def test_tqdm_outside_a_kernel(capsys):
    pytest.importorskip("tqdm")
    h = train(lambda: 0.25, steps=30, title="fit")
    assert h.steps == 30
    err = capsys.readouterr().err
    assert "fit" in err and "30/30" in err


class _Handle:
    """What IPython's display(..., display_id=True) returns, recording updates."""

    def __init__(self, shown):
        self.shown = shown

    def update(self, obj, **kw):
        self.shown.append(("update", obj, kw))


def _fake_display(monkeypatch):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("IPython")
    shown = []
    import IPython.display

    def display(*objs, **kw):
        shown.extend(("display", o, kw) for o in objs)
        return _Handle(shown) if kw.get("display_id") else None
    monkeypatch.setattr(IPython.display, "display", display)
    return shown


WIDGET = "application/vnd.jupyter.widget-view+json"


def test_widget_view_updates_in_place(monkeypatch):
    shown = _fake_display(monkeypatch)
    views = []

    class Recorded(training._WidgetView):
        def __init__(self, *args):
            super().__init__(*args)
            views.append(self)
    monkeypatch.setitem(training.__dict__, "_WidgetView", Recorded)
    title = "fit_a_line, 2 trainers and 2 parameter servers"
    h = train(lambda: 0.5, steps=40, progress="widget", title=title)
    (kind, first, kw), (kind2, last, kw2) = shown
    assert (kind, kind2) == ("display", "update") and kw["raw"] and kw2["raw"]
    box = views[0].box
    assert first[WIDGET]["model_id"] == box.model_id
    assert "fluid-train" in box._dom_classes
    heading, bar, label = box.children[0].children
    curve = box.children[1]
    assert heading.value == title                  # the whole title, not cut
    assert bar.value == 40 and bar.max == 40 and bar.bar_style == "success"
    assert label.value.startswith("40/40  loss 0.5")
    assert "<polyline" in curve.value and "loss 0.5 at step 40" in curve.value
    assert h.stopped == "finished"
    # without widgets, a front end shows a progress line, brought up to date at the end
    assert first["text/plain"] == f"{title}: 0/40"
    assert last["text/plain"] == f"{title}: {label.value}"
    assert last[WIDGET] == first[WIDGET]


def test_the_progress_line_and_the_history_agree_on_steps_per_second(monkeypatch):
    shown = _fake_display(monkeypatch)

    def step():
        time.sleep(0.002)
        return 1.0
    h = train(step, steps=30, progress="widget")
    final = shown[-1][1]["text/plain"]
    rate = re.search(r"([\d,]+) steps/s", repr(h)).group(1)
    assert final.endswith(f"{rate} steps/s") and h.steps_per_second == 30 / h.seconds


def test_smoothing_draws_a_moving_average_over_the_raw_loss():
    noisy = list(1.0 + 0.5 * np.sin(np.arange(200) * 2.1))
    raw = loss_curve_svg(noisy, smoothing=0)
    smoothed = loss_curve_svg(noisy)
    assert raw.count("<polyline") == 1 and smoothed.count("<polyline") == 2
    assert 'stroke-opacity="0.3"' in smoothed and "(smoothed " in smoothed
    ema = training.smooth(noisy, 0.6)
    assert ema[0] == pytest.approx(noisy[0])              # debiased: no pull towards 0
    assert np.std(ema[50:]) < 0.5 * np.std(noisy[50:])
    assert np.allclose(training.smooth([1.0, 1.0, 1.0], 0.9), 1.0)
    with pytest.raises(ValueError, match="smoothing"):
        train(lambda: 1.0, steps=1, progress=False, smoothing=1.0)


def test_loss_curve_svg():
    svg = loss_curve_svg([10.0, 1.0, 0.1, 0.01, 0.001])
    assert "log" in svg and svg.count(",") >= 5
    many = loss_curve_svg(list(np.linspace(1, 0, 5000)))
    assert len(many) < 40000                               # summarised per column
    assert "no values yet" in loss_curve_svg([])
    assert "<polyline" in loss_curve_svg([float("nan"), 1.0, 2.0])


def test_in_kernel_is_false_here():
    assert training.in_kernel() is False


def test_training_from_a_thread_does_not_touch_signals():
    out = {}

    def work():
        out["h"] = train(lambda: 1.0, steps=5, progress=False)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out["h"].steps == 5


# --- long runs ------------------------------------------------------------------------------

def _polyline_xs(svg):
    points = re.findall(r'points="([^"]*)"', svg)
    return [float(p.split(",")[0]) for line in points for p in line.split()]


def test_a_million_steps_redraw_from_a_bounded_summary(monkeypatch):
    """Each redraw draws at most 2 x COLUMNS buckets, however many steps ran: the cost of a
    redraw does not grow with the run (measured as work, not time)."""
    shown = _fake_display(monkeypatch)
    drawn = []
    real = training.loss_curve_svg

    def recording(curve, *args, **kwargs):
        assert isinstance(curve, training.CurveData)   # never the whole list of losses
        drawn.append((curve.count, len(curve.buckets)))
        return real(curve, *args, **kwargs)
    monkeypatch.setattr(training, "loss_curve_svg", recording)
    monkeypatch.setattr(training, "REFRESH_SECONDS", 0.02)
    losses = iter(np.abs(np.sin(np.arange(1_000_000) * 0.001)) + 0.1)
    h = train(lambda: next(losses), steps=1_000_000, progress="widget")
    assert h.steps == 1_000_000 and h.curve.count == 1_000_000
    assert len(drawn) >= 3 and drawn[-1][0] == 1_000_000
    assert max(buckets for _, buckets in drawn) <= 2 * training.COLUMNS + 1
    final = shown[-1][1]
    svg = real(h.curve)
    assert "1000000 steps" in svg and len(svg) < 60_000
    assert len(_polyline_xs(svg)) <= 3 * 2 * training.COLUMNS + 2
    assert "text/plain" in final


def test_the_envelope_keeps_a_single_spike_visible():
    losses = [1.0] * 200_000
    losses[123_457] = 50.0
    svg = loss_curve_svg(losses, smoothing=0)
    ys = [float(p.split(",")[1]) for p in re.search(r'points="([^"]*)"', svg).group(1).split()]
    assert min(ys) == pytest.approx(16.0, abs=0.1)   # the top of the plot: the spike's max


def test_the_x_axis_follows_the_steps_run(data):
    net = Net().Compile(seed=0)
    h = train(net.train_step, steps=1000, data=[data] * 10, progress=False)
    assert (h.steps, h.stopped) == (10, "end of data")
    svg = h.plot()._repr_svg_()
    assert "10 steps" in svg and "1000 steps" not in svg
    assert max(_polyline_xs(svg)) == pytest.approx(480 - 10, abs=0.1)   # the right edge


# --- NaN and inf losses ----------------------------------------------------------------------

def _nan_at(data, step):
    x, y = data
    bad = (np.full_like(x, np.nan), y)
    return lambda i: bad if i == step - 1 else data


def test_a_nan_loss_stops_and_takes_the_step_back_when_history_is_on(data):
    net, twin = Net().Compile(seed=0), Net().Compile(seed=0)
    net.keep_history(True)
    h = train(net.train_step, steps=50, data=_nan_at(data, 5), progress=False)
    assert h.steps == 4 and "loss nan at step 5" in h.stopped and "taken back" in h.stopped
    assert all(np.isfinite(v) for v in h.loss) and len(h.loss) == 4
    for _ in range(4):
        twin.train_step(*data)
    for name, value in net.parameters().items():
        np.testing.assert_array_equal(value, twin.parameters()[name])
    assert "loss nan at step 5" in repr(h)


def test_a_nan_loss_without_history_stops_and_says_so(data):
    net = Net().Compile(seed=0)
    h = train(net.train_step, steps=50, data=_nan_at(data, 3), progress=False)
    assert h.steps == 3 and "loss nan at step 3" in h.stopped
    assert "keep_history()" in h.stopped and np.isnan(h.loss[-1])


def test_on_nan_warn_and_ignore_go_on(data):
    losses = [1.0, float("inf"), 0.5, float("nan"), 0.25]
    with pytest.warns(RuntimeWarning, match="loss is inf at step 2"):
        h = train(lambda step: losses[step], steps=5, data=range(5), progress=False,
                  on_nan="warn")
    assert h.stopped == "finished" and h.steps == 5
    h = train(lambda step: losses[step], steps=5, data=range(5), progress=False,
              on_nan="ignore")
    assert h.stopped == "finished" and np.isinf(h.loss[1])
    with pytest.raises(ValueError, match="on_nan must be one of"):
        train(lambda: 1.0, steps=1, progress=False, on_nan="skip")


# --- which value is the loss -----------------------------------------------------------------

class TupleNet(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        y_predict = fluid.layers.fc(input=x, size=1)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=y_predict, label=y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(avg_cost)
        return y_predict, avg_cost


def test_a_tuple_return_records_its_only_scalar(data):
    net = TupleNet().Compile(seed=0)
    h = train(net.train_step, steps=20, data=[data] * 20, progress=False)
    assert len(h.loss) == 20 and h.loss[-1] < h.loss[0]


@pytest.mark.parametrize("result, hint", [
    ((np.zeros(3), np.ones(2)), "pass loss=0"),
    ((np.zeros(3), 1.0, 2.0), "pass loss=1"),
    ({"a": 1.0, "b": 2.0}, "pass loss='a'"),
    ({"pred": np.zeros(4)}, "pass loss='pred'"),
])
def test_a_return_without_an_obvious_loss_asks_for_loss(result, hint):
    with pytest.raises(ValueError, match="cannot tell which is the loss") as info:
        train(lambda: result, steps=3, progress=False)
    assert hint in str(info.value)
    h = train(lambda: result, steps=3, progress=False,
              loss=lambda r: 0.5)
    assert h.loss == [0.5, 0.5, 0.5]
