"""Program <-> JSON, lossless. Plain data only: loading never evaluates code."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ..errors import VerifyError
from .blocks import check_nesting
from .records import BlockDesc, OpDesc, ProgramDesc, ReturnSpec, SourceLoc, VarDesc

FORMAT = "fluid_interactive.program"


def _returns_to_json(r: ReturnSpec) -> Any:
    if r is None or isinstance(r, str):
        return r
    if isinstance(r, tuple):
        return {"tuple": [_returns_to_json(x) for x in r]}
    return {"dict": [[k, _returns_to_json(v)] for k, v in r.items()]}


def _returns_from_json(j: Any) -> ReturnSpec:
    if j is None or isinstance(j, str):
        return j
    if "tuple" in j:
        return tuple(_returns_from_json(x) for x in j["tuple"])
    return {k: _returns_from_json(v) for k, v in j["dict"]}


def _attr_to_json(value: Any) -> Any:
    # Tuples and lists both become JSON arrays; tag tuples so the round trip is exact.
    if isinstance(value, tuple):
        return {"__tuple__": [_attr_to_json(v) for v in value]}
    if isinstance(value, list):
        return [_attr_to_json(v) for v in value]
    if isinstance(value, float) and value != value:
        return {"__float__": "nan"}
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return {"__float__": "inf" if value > 0 else "-inf"}
    return value


def _attr_from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if "__tuple__" in value:
            return tuple(_attr_from_json(v) for v in value["__tuple__"])
        if "__float__" in value:
            return float(value["__float__"])
        raise ValueError(f"unexpected attr object {value!r}")
    if isinstance(value, list):
        return [_attr_from_json(v) for v in value]
    return value


def _op_to_json(op: OpDesc) -> dict:
    return {
        "type": op.type, "inputs": op.inputs, "outputs": op.outputs,
        "attrs": {k: _attr_to_json(v) for k, v in op.attrs.items()},
        "role": op.role, "role_var": list(op.role_var),
        "loc": None if op.loc is None else [op.loc.file, op.loc.line, op.loc.function],
    }


def _op_from_json(j: dict) -> OpDesc:
    loc = j.get("loc")
    return OpDesc(
        type=str(j["type"]),
        inputs={str(k): [str(n) for n in v] for k, v in j["inputs"].items()},
        outputs={str(k): [str(n) for n in v] for k, v in j["outputs"].items()},
        attrs={str(k): _attr_from_json(v) for k, v in j["attrs"].items()},
        role=int(j["role"]), role_var=tuple(str(x) for x in j["role_var"]),
        loc=None if loc is None else SourceLoc(str(loc[0]), int(loc[1]), str(loc[2])),
    )


def _block_to_json(b: BlockDesc) -> dict:
    return {
        "idx": b.idx, "parent_idx": b.parent_idx, "name": b.name,
        "vars": [dict(asdict(v), shape=list(v.shape)) for v in b.vars.values()],
        "ops": [_op_to_json(op) for op in b.ops],
        "feeds": list(b.feeds), "returns": _returns_to_json(b.returns), "is_test": b.is_test,
    }


def _block_from_json(j: dict) -> BlockDesc:
    fields = set(VarDesc.__dataclass_fields__)
    vars_ = [VarDesc(**{k: v for k, v in vj.items() if k in fields}) for vj in j["vars"]]
    return BlockDesc(
        idx=int(j["idx"]), parent_idx=int(j["parent_idx"]), name=str(j["name"]),
        vars={v.name: v for v in vars_}, ops=[_op_from_json(o) for o in j["ops"]],
        feeds=[str(f) for f in j["feeds"]], returns=_returns_from_json(j["returns"]),
        is_test=j.get("is_test"),
    )


def program_to_json(program: ProgramDesc, indent: int | None = None) -> str:
    doc = {"format": FORMAT, "version": program.version, "name": program.name,
           "blocks": [_block_to_json(b) for b in program.blocks]}
    return json.dumps(doc, indent=indent, allow_nan=False)


def program_from_json(text: str) -> ProgramDesc:
    """The program `program_to_json` wrote; a `VerifyError` (a ValueError) for text that
    is not one."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise VerifyError(f"program JSON does not parse: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise VerifyError(f"not a fluid_interactive program (expected \"format\": {FORMAT!r})")
    try:
        program = ProgramDesc(blocks=[_block_from_json(b) for b in doc["blocks"]],
                              name=str(doc.get("name", "")), version=int(doc["version"]))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise VerifyError(f"program JSON is malformed: {type(e).__name__}: {e} (was it "
                          f"written by fluid.program_to_json?)") from None
    check_nesting(program)
    return program
