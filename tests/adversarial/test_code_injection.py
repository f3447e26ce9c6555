"""Text from a program file never runs: names, attr keys and source locations that would
end a comment of the generated code are refused by the verifier `fluid.load` runs, refused
at trace time with the user's line, and escaped by code generation in any case."""
import json
import os

import pytest

import fluid
from fluid_interactive.ir.serialize import program_from_json
from fluid_interactive.runtime.live import checkpoint
from fluid_interactive.runtime.live.compiled import CompiledProgram

from .programs import (
    TMP,
    W,
    batch,
    edit_program,
    manifest,
    rename_everywhere,
    saved,
    write_manifest,
)

MARK = "pwned"   # created in the test's working directory if an injection ran


def payloads():
    """Text that, written raw into a ``# ...`` comment of generated code, runs a statement
    on the next call (each line break Python knows), or breaks compilation (a NUL)."""
    statement = f"open({MARK!r}, 'w').close()"
    return [f"a\n    {statement}  #", f"a\r    {statement}  #", f"a\r\n    {statement}  #",
            "a\x00b", "a\u2028b", "a\x1bb"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert not os.path.exists(tmp_path / MARK), "injected code ran"


def _set_loc_file(payload):
    def edit(doc):
        doc["blocks"][1]["ops"][0]["loc"][0] = payload
    return edit


def _rename(old, payload):
    def edit(doc):
        doc.update(rename_everywhere(doc, old, payload))
    return edit


def _tamper_each_route(path, route, payload):
    if route == "op location":
        edit_program(path, _set_loc_file(payload))
    elif route == "temporary name":
        edit_program(path, _rename(TMP, payload))
    else:  # a parameter's name, with its manifest entry renamed to match
        edit_program(path, _rename(W, payload))
        doc = manifest(path)
        for entry in doc["vars"]:
            if entry["name"] == W:
                entry["name"] = payload
        write_manifest(path, doc)


ROUTES = ["op location", "temporary name", "parameter name"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("payload", payloads(), ids=lambda p: repr(p)[:12])
def test_tampered_checkpoint_is_refused_before_anything_runs(tmp_path, route, payload):
    path = saved(tmp_path / "ckpt")
    _tamper_each_route(path, route, payload)
    with pytest.raises(fluid.CheckpointError, match="program.json: not a valid program") \
            as info:
        fluid.load(str(path))
    assert "\n    open(" not in str(info.value)   # shown escaped, not as a forged line


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("payload", payloads()[:3], ids=["lf", "cr", "crlf"])
def test_generated_code_escapes_text_even_past_the_verifier(tmp_path, route, payload):
    """A program that skipped verification (built by hand from the same JSON) still
    compiles to code whose comments hold the text escaped, and runs correctly."""
    path = saved(tmp_path / "ckpt")
    _tamper_each_route(path, route, payload)
    program = program_from_json((path / checkpoint.PROGRAM).read_text())
    prog = CompiledProgram(program, seed=0)
    prog.train_step(*batch())
    prog.infer(batch()[0])
    source = prog.train_step.source + prog.infer.source
    assert "open('pwned'" in source                 # the text is there, in a comment ...
    for line in source.splitlines():
        assert not line.lstrip().startswith("open(")  # ... never as a statement


def _trace(method_body):
    class Attack(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = fluid.layers.data(name="x", shape=[13], dtype="float32")
            return method_body(x)
    return Attack


TRACE_ROUTES = {
    "var_scope": lambda p: lambda x: _in_scope(p, x),
    "layer name=": lambda p: lambda x: fluid.layers.mean(x, name=p),
    "ParamAttr(name=)": lambda p: lambda x: fluid.layers.fc(
        input=x, size=1, param_attr=fluid.ParamAttr(name=p)),
    "data(name=)": lambda p: lambda x: fluid.layers.data(name=p, shape=[1], dtype="float32"),
}


def _in_scope(name, x):
    with fluid.var_scope(name):
        return fluid.layers.fc(input=x, size=1)


@pytest.mark.parametrize("route", sorted(TRACE_ROUTES))
@pytest.mark.parametrize("payload", payloads(), ids=lambda p: repr(p)[:12])
def test_trace_time_names_are_refused_at_the_users_line(route, payload):
    cls = _trace(TRACE_ROUTES[route](payload))
    with pytest.raises(fluid.OpArgumentError, match="control character") as info:
        cls().Compile(seed=0)
    message = str(info.value)
    assert "test_code_injection.py:" in message     # the user's line
    assert "\n    open(" not in message


def test_a_nul_in_a_name_is_a_clear_error_not_a_syntax_error(tmp_path):
    path = saved(tmp_path / "ckpt")
    edit_program(path, _rename(TMP, "a\x00b"))
    with pytest.raises(fluid.CheckpointError, match=r"'\\x00'"):
        fluid.load(str(path))
    program = program_from_json((path / checkpoint.PROGRAM).read_text())
    prog = CompiledProgram(program, seed=0)
    assert prog.infer(batch()[0]).shape == (8, 1)   # escaped, so it compiles and runs


def test_verifier_rejects_unprintable_attr_keys_and_string_attrs(tmp_path):
    path = saved(tmp_path / "ckpt")

    def bad_key(doc):
        op = doc["blocks"][1]["ops"][0]
        op["attrs"]["x\nnum_col_dims"] = op["attrs"].pop("x_num_col_dims", 1)
    edit_program(path, bad_key)
    with pytest.raises(fluid.CheckpointError, match="attr key"):
        fluid.load(str(path))
    text = (path / checkpoint.PROGRAM).read_text()
    with pytest.raises(fluid.VerifyError, match="attr key"):
        fluid.check_program(program_from_json(text))


def test_program_json_round_trip_keeps_rejecting(tmp_path):
    path = saved(tmp_path / "ckpt")
    edit_program(path, _rename(W, "w\n"))
    program = program_from_json((path / checkpoint.PROGRAM).read_text())
    with pytest.raises(fluid.VerifyError, match=r"'\\n'"):
        fluid.check_program(program)
    assert json.loads(fluid.program_to_json(program))   # still plain data
