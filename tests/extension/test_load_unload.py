"""%load_ext / %unload_ext / %reload_ext leave exactly one set of hooks, magics and
formatters, and put `fluid` into the namespace."""
import pytest

pytest.importorskip("IPython")

import fluid
from fluid import ipython as fext
from fluid_interactive.frontend import program as frontend_program
from fluid_interactive.ir import ProgramDesc, source
from fluid_interactive.ir.diff import ProgramDiff
from fluid_interactive.runtime.live.compiled import CompiledMethod, CompiledProgram

TYPES = (CompiledProgram, CompiledMethod, ProgramDesc)


def ours(shell):
    """Counts of everything the extension registers on ``shell``."""
    def is_ours(cb):
        return isinstance(getattr(cb, "__self__", None), fext.FluidExtension)

    formatters = shell.display_formatter.formatters
    return {
        "pre_run_cell": sum(map(is_ours, shell.events.callbacks["pre_run_cell"])),
        "post_run_cell": sum(map(is_ours, shell.events.callbacks["post_run_cell"])),
        "diff_html": int(formatters["text/html"].type_printers.get(ProgramDiff)
                         is fext._diff_formatter),
        "svg": sum(formatters["image/svg+xml"].type_printers.get(t) is fext._svg_formatter
                   for t in TYPES),
        "text": sum(formatters["text/plain"].type_printers.get(t) is fext._text_formatter
                    for t in TYPES),
        "html": sum(formatters["text/html"].type_printers.get(t) is fext._html_formatter
                    for t in TYPES),
        "labeller": int(any(isinstance(getattr(f, "__self__", None), fext.FluidExtension)
                            for f in source._labellers)),
        "line_magic": int("fluid" in shell.magics_manager.magics["line"]),
        "cell_magic": int("fluid" in shell.magics_manager.magics["cell"]),
        "custom_exc": int(shell.custom_exceptions == (Exception,)),
        "class_listener": sum(map(is_ours, frontend_program._class_listeners)),
        "history_on": int(fluid.history_defaults()["enabled"]),
        "fluid_in_ns": int(shell.user_ns.get("fluid") is fluid),
    }


ONE = {"pre_run_cell": 1, "post_run_cell": 0, "diff_html": 1, "svg": 3, "text": 3, "html": 3,
       "labeller": 1, "line_magic": 1, "cell_magic": 1, "custom_exc": 1, "class_listener": 1,
       "history_on": 1, "fluid_in_ns": 1}
NONE = dict.fromkeys(ONE, 0)


@pytest.fixture
def bare(shell):
    """The shell without the extension, restored to that afterwards."""
    shell.reset(new_session=False)
    yield shell
    fluid.unload_ipython_extension(shell)
    shell.extension_manager.loaded.discard("fluid")
    shell.reset(new_session=False)


def test_load_twice_unload_reload(bare):
    shell = bare
    assert ours(shell) == NONE
    shell.run_line_magic("load_ext", "fluid")
    assert ours(shell) == ONE
    shell.run_line_magic("load_ext", "fluid")           # IPython: already loaded
    fluid.load_ipython_extension(shell)                 # our own guard
    assert ours(shell) == ONE
    shell.run_line_magic("reload_ext", "fluid")
    assert ours(shell) == ONE
    shell.run_line_magic("reload_ext", "fluid")
    assert ours(shell) == ONE
    shell.run_line_magic("unload_ext", "fluid")
    assert ours(shell) == NONE
    fluid.unload_ipython_extension(shell)               # a second unload is harmless
    assert ours(shell) == NONE
    shell.run_line_magic("load_ext", "fluid")
    assert ours(shell) == ONE


def test_unload_restores_what_was_there(bare):
    shell = bare
    svg = shell.display_formatter.formatters["image/svg+xml"]

    def theirs(obj):
        return "<svg/>"

    svg.for_type(ProgramDesc, theirs)
    try:
        shell.run_line_magic("load_ext", "fluid")
        assert svg.type_printers[ProgramDesc] is fext._svg_formatter
        shell.run_line_magic("unload_ext", "fluid")
        assert svg.type_printers[ProgramDesc] is theirs
        assert frontend_program._class_listeners == []
        assert fluid.history_defaults()["enabled"] is False
        assert shell.custom_exceptions == ()
    finally:
        svg.type_printers.pop(ProgramDesc, None)


def test_another_custom_exception_handler_is_left_alone(bare):
    shell = bare

    def handler(self, etype, value, tb, tb_offset=None):
        return ["theirs"]

    shell.set_custom_exc((ZeroDivisionError,), handler)
    try:
        shell.run_line_magic("load_ext", "fluid")
        assert shell.custom_exceptions == (ZeroDivisionError,)
        shell.run_line_magic("unload_ext", "fluid")
        assert shell.custom_exceptions == (ZeroDivisionError,)
    finally:
        shell.set_custom_exc((), None)


def test_hooks_fire_once_per_cell(ip):
    calls = []
    pre = lambda info: calls.append("pre")  # noqa: E731
    post = lambda result: calls.append("post")  # noqa: E731
    ip.events.register("pre_run_cell", pre)
    ip.events.register("post_run_cell", post)
    try:
        ip.run_cell("x = 1")
        assert calls == ["pre", "post"]
        calls.clear()
        ip.run_cell("%%fluid\nclass Tiny(fluid.Program):\n"
                    "    @fluid.network('x')\n    def f(self, x):\n"
                    "        x = fluid.layers.data(name='x', shape=[2], dtype='float32')\n"
                    "        return fluid.layers.fc(input=x, size=1)\n")
        assert calls == ["pre", "post"]
        assert "Tiny" in ip.user_ns
    finally:
        ip.events.unregister("pre_run_cell", pre)
        ip.events.unregister("post_run_cell", post)


def test_fluid_module_is_the_extension_package(ip):
    assert ip.user_ns["fluid"] is fluid
    import fluid_interactive
    for name in fluid_interactive.__all__:
        assert getattr(fluid, name) is getattr(fluid_interactive, name), name
