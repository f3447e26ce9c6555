"""Errors end at the user's line: fluid's own frames are hidden from tracebacks, and
locations name the cell as IPython does."""
import re

import pytest

pytest.importorskip("IPython")

import fluid
from fluid.ipython import strip_internal_frames
from tests.extension.helpers import DATA_CELL, NET_CELL, run, run_capture

BAD_CELL = '''class Bad(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        h = fluid.layers.fc(input=x, size=2)
        return fluid.layers.elementwise_add(h, x)   # [?,2] + [?,3]

bad = Bad().Compile()
'''


def test_compile_error_points_at_the_cell_line(ip):
    result, out, err = run_capture(ip, BAD_CELL)
    assert isinstance(result.error_in_exec, fluid.ShapeError)
    text = out + err
    assert "fluid_interactive" not in text.split("ShapeError:")[0]
    assert "live.py" not in text and "program.py" not in text
    assert "----> 8 bad = Bad().Compile()" in text
    assert "line 6, in Bad.f(self, x)" in text
    assert "----> 6 return fluid.layers.elementwise_add(h, x)" in text
    assert "\nShapeError: elementwise_add" in text
    # the Compile() call and the method's line, and the message's own "at Cell In[..]"
    assert text.count("Cell In[") == 3


def test_user_errors_inside_a_method_end_at_that_line(ip):
    result, out, err = run_capture(ip, BAD_CELL.replace(
        "h = fluid.layers.fc(input=x, size=2)", "h = fluid.layers.fc(input=x, size=2) + nope"))
    assert isinstance(result.error_in_exec, NameError)
    text = out + err
    assert "program.py" not in text and "live.py" not in text
    assert "NameError" in text and "nope" in text


def test_definition_errors_show_only_the_cell(ip):
    result, out, err = run_capture(ip, '''class Clash(fluid.Program):
    @fluid.network()
    def save(self):
        pass
''')
    assert isinstance(result.error_in_exec, fluid.ProgramDefinitionError)
    assert "program.py" not in out + err


def test_runtime_errors_keep_the_users_line(ip):
    run(ip, NET_CELL)
    run(ip, DATA_CELL)
    run(ip, "net = Net().Compile(seed=0)")
    result, out, err = run_capture(ip, "net.train_step(X[:, :2], Y)")
    assert isinstance(result.error_in_exec, fluid.FeedError)
    text = out + err
    assert "----> 1 net.train_step(X[:, :2], Y)" in text
    assert "<fluid:entry" not in text and "feed.py" not in text


def test_full_tracebacks_on_request(ip):
    ip.run_line_magic("fluid", "traceback full")
    try:
        result, out, err = run_capture(ip, BAD_CELL)
        assert "program.py" in out + err
    finally:
        ip.run_line_magic("fluid", "traceback user")
    result, out, err = run_capture(ip, BAD_CELL)
    assert "program.py" not in out + err


def test_errors_of_other_code_are_untouched(ip):
    result, out, err = run_capture(ip, "import json\njson.loads('{')")
    text = out + err
    assert "JSONDecodeError" in text and "decoder.py" in text


def test_syntax_errors_still_show(ip):
    result, out, err = run_capture(ip, "def f(:\n  pass")
    assert isinstance(result.error_before_exec, SyntaxError)
    assert "SyntaxError" in out + err


def test_a_bug_inside_fluid_keeps_its_frames():
    def inner():
        raise RuntimeError("bug")

    try:
        inner()
    except RuntimeError as e:
        tb = e.__traceback__
    assert strip_internal_frames(tb) is tb            # no internal frames at all
    assert strip_internal_frames(None) is None


def test_locations_name_the_cell_as_ipython_does(ip):
    """The text form, graph tooltips and error messages say ``Cell In[N], line L``, not
    the cell's temporary file."""
    result, out, err = run_capture(ip, BAD_CELL)
    message = str(result.error_in_exec)
    cell = re.search(r"at (Cell In\[\d+\]), line 6 \(in f\(\)\)$", message)
    assert cell, message
    run(ip, NET_CELL)
    run(ip, "net = Net().Compile(seed=0)")
    text = ip.user_ns["net"].train_step.text
    assert re.search(r"# Cell In\[\d+\], line \d+$", text.splitlines()[1])
    dot = fluid.graph(ip.user_ns["net"].train_step, detail="ops").dot
    assert re.search(r'tooltip="Cell In\[\d+\], line \d+"', dot)
    grouped = fluid.graph(ip.user_ns["net"].train_step).dot
    assert re.search(r"at Cell In\[\d+\], line \d+", grouped)
    fluid.unload_ipython_extension(ip)
    assert "Cell In[" not in ip.user_ns["net"].train_step.text    # the file's name again
