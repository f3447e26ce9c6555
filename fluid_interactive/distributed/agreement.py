"""What the roles of one job must agree on, and how a server says where two roles differ.

Every role transpiles the script's program for itself, so a trainer and a server agree only
if they built the same plan. A `Fingerprint` of a server holds what makes the job the same
job for that server: its program and startup program (ops, attrs, vars, shapes), the number
of trainers, the mode, the servers, where every parameter block lives (slicing and
placement) and which optimize block runs for which gradients. It leaves out what may
differ between processes of one job: source locations (``python main.py`` records an
absolute path, ``fluid run main.py`` a relative one, another working directory another
one) and the attrs an op's spec marks as paths of files (`OpSpec.path_attrs`: a reader's
data files, which each process may keep where it likes).

A trainer hands its fingerprint of each server to that server when it connects
(`ParameterServer.connect`); the server compares digests and, when they differ, names the
ops and vars that differ (through the program diff, `fluid_interactive.ir.diff`) and the
settings that differ.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from ..ir.diff import ProgramDiff, diff_programs
from ..ir.records import ProgramDesc
from ..ir.serialize import program_to_json
from ..ops.registry import get_spec
from ..passes.transpiler import TranspilePlan

#: A refusal lists at most this many differences, each cut to this many characters (the
#: settings first: a different trainer count changes every update block after it).
_SHOWN = 8
_LINE = 240


@dataclass(frozen=True)
class Fingerprint:
    """What a server's role in a job is (see the module docstring); ``digest`` is a hash
    of all of it."""
    endpoint: str
    facts: tuple[tuple[str, str], ...]     # (what, value) of the job-wide settings
    program: ProgramDesc
    startup: ProgramDesc
    digest: str


def comparable(program: ProgramDesc) -> ProgramDesc:
    """A copy of ``program`` without what may differ between the processes of one job:
    source locations, path attrs (by each op's spec) and the program's name."""
    out = program.clone()
    out.name = ""
    for block in out.blocks:
        for op in block.ops:
            op.loc = None
            for attr in _path_attrs(op.type):
                op.attrs.pop(attr, None)
    return out


def _path_attrs(op_type: str) -> tuple[str, ...]:
    try:
        return get_spec(op_type).path_attrs
    except Exception:   # an op this process does not know: nothing to leave out
        return ()


def _facts(plan: TranspilePlan, endpoint: str) -> tuple[tuple[str, str], ...]:
    placement = []
    for param in plan.distributed_params():
        blocks = ", ".join(f"{p.name} rows {p.start}:{p.start + p.rows} on {p.endpoint}"
                           for p in plan.param_blocks(param))
        placement.append(f"{param}: {blocks}")
    info = plan.pserver_info(endpoint)
    updates = [f"{b.param_block} <- {', '.join(b.feeds)} ({b.method}, block {b.block_idx})"
               for b in info.optimize_blocks]
    schedules = [f"{m}: block {idx}" for m, idx in info.lr_blocks.items()]
    return (("the number of trainers", str(plan.trainers)),
            ("the mode", plan.mode),
            ("the servers", ", ".join(plan.endpoints)),
            ("the methods split across trainers", ", ".join(plan.main)),
            ("the parameter blocks", "; ".join(placement)),
            ("this server's updates", "; ".join(updates)),
            ("this server's schedules", "; ".join(schedules)))


def fingerprint(plan: TranspilePlan, endpoint: str) -> Fingerprint:
    """The fingerprint of server ``endpoint`` in ``plan``."""
    program = comparable(plan.pserver_program(endpoint))
    startup = comparable(plan.startup_program(endpoint))
    facts = _facts(plan, endpoint)
    text = json.dumps([endpoint, facts]) + program_to_json(program) + program_to_json(startup)
    return Fingerprint(endpoint, facts, program, startup,
                       hashlib.sha256(text.encode()).hexdigest()[:16])


def differences(server: Fingerprint, trainer: Fingerprint) -> list[str]:
    """What differs between a server's fingerprint and a trainer's of the same server, one
    line each; [] when they agree."""
    if server.digest == trainer.digest:
        return []
    out = []
    if server.endpoint != trainer.endpoint:
        out.append(f"the server: {trainer.endpoint} for the trainer, {server.endpoint} for "
                   f"the server")
    ours, theirs = dict(server.facts), dict(trainer.facts)
    for what in dict.fromkeys(list(ours) + list(theirs)):
        a, b = ours.get(what) or "(none)", theirs.get(what) or "(none)"
        if a != b:
            out.append(f"{what}: {b} for the trainer, {a} for the server")
    changed: list[str] = []
    one_sided: list[str] = []
    for title, old, new in (("program", trainer.program, server.program),
                            ("startup program", trainer.startup, server.startup)):
        edits, extra = _program_changes(diff_programs(old, new))
        changed += [f"{title}: {line}" for line in edits]
        one_sided += [f"{title}: {line}" for line in extra]
    out += changed + one_sided
    if not out:
        out.append("the programs differ in what the program diff does not show (a var's "
                   "flags or a temporary's name); compare plan.text() of both")
    lines = [line if len(line) <= _LINE else line[:_LINE - 3] + "..." for line in out]
    if len(lines) > _SHOWN:
        lines = lines[:_SHOWN] + [f"... and {len(lines) - _SHOWN} more differences"]
    return lines


def _program_changes(diff: ProgramDiff) -> tuple[list[str], list[str]]:
    """The vars and ops that differ (old: the trainer's program, new: the server's), as
    short lines: what is in both but differs, then what only one side has, by side."""
    changed = [f"var {s.name}: {s.reason}" for s in diff.state if s.status == "reinitialised"]
    only: dict[str, list[str]] = {"server": [], "trainer": []}
    for block in diff.blocks:
        if block.status in ("added", "removed"):
            only["server" if block.status == "added" else "trainer"].append(
                f"block {block.name}")
            continue
        changed += [f"block {block.name}: {s}" for s in block.signature]
        for change in block.ops:
            op = change.new or change.old
            assert op is not None
            text = f"op {op.type} -> {', '.join(op.output_names())}"
            if change.kind == "changed":
                changed.append(f"block {block.name}, {text}: " + "; ".join(change.details))
            else:
                only["server" if change.kind == "added" else "trainer"].append(text)
    for s in diff.state:
        if s.status in ("added", "dropped"):
            only["server" if s.status == "added" else "trainer"].append(f"var {s.name}")
    one_sided = [f"only in the {side}'s: {', '.join(items)}" for side, items in only.items()
                 if items]
    return changed, one_sided
