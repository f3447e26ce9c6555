"""``fluid run``: run a script in a role, or launch a whole job on this machine.

    fluid run main.py --distributed main=train_step
        runs main.py in this process (as ``python main.py`` would), in the role that
        ``TRAINING_ROLE`` names: this is how a parameter server is started.

    fluid run main.py --distributed main=train_step --trainers 2 --pservers 2
        starts a job on this machine (`launcher.Launcher`): a private Ray cluster (or
        ``RAY_ADDRESS``), one PSERVER process per server and one TRAINER process per
        trainer, each running main.py; exits with the trainers' status.

``--trainers`` and ``--pservers`` may stand anywhere after ``run``; everything else goes to
the script. The arguments are checked before anything starts: a malformed option is one
line on stderr and exit status 2.
"""
from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Mapping, Sequence

from ..errors import OpArgumentError
from .errors import DistributedError
from .launcher import Launcher, role_limit
from .roles import timeout_from_env
from .settings import distributed_options

USAGE = ("usage: fluid run SCRIPT [ARGS...] [--trainers N --pservers M]\n"
         "  see docs/distributed.md")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "run" or len(args) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        counts, rest = _launcher_options(args[1:])
        if not rest:
            raise ValueError("no script to run")
        script, script_args = rest[0], rest[1:]
        _check(script, script_args, counts, os.environ)
    except (ValueError, DistributedError) as e:
        print(f"fluid run: {e}", file=sys.stderr)
        return 2
    if counts:
        return Launcher(script, script_args, **counts).run()
    return run_script(script, script_args)


def _launcher_options(args: list[str]) -> tuple[dict[str, int], list[str]]:
    counts: dict[str, int] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        key, value = None, ""
        for name in ("trainers", "pservers"):
            if a == f"--{name}":
                if i + 1 >= len(args):
                    raise ValueError(f"--{name} needs a number")
                key, value, i = name, args[i + 1], i + 2
            elif a.startswith(f"--{name}="):
                key, value, i = name, a.split("=", 1)[1], i + 1
        if key is None:
            rest.append(a)
            i += 1
            continue
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"--{key} must be a positive integer; got {value!r}")
        counts[key] = int(value)
    if counts and len(counts) != 2:
        raise ValueError("--trainers and --pservers go together")
    return counts, rest


def _check(script: str, args: Sequence[str], counts: Mapping[str, int],
           env: Mapping[str, str]) -> None:
    """Everything that can be checked before anything starts (ValueError: what is wrong)."""
    if not os.path.isfile(script):
        raise ValueError(f"no such script: {script}")
    try:
        options = distributed_options(args, env)
    except OpArgumentError as e:
        raise ValueError(str(e)) from None
    timeout_from_env(env)
    if not counts:
        return
    if not options:
        raise ValueError("a job needs the script's --distributed option, e.g. --distributed "
                         "main=train_step")
    for key, want in counts.items():
        if key in options and options[key] != want:
            raise ValueError(f"--distributed says {key}={options[key]} but --{key} {want}; "
                             f"give the count once")
    limit, why = role_limit(env)
    wanted = counts["trainers"] + counts["pservers"]
    if wanted > limit:
        raise ValueError(f"{wanted} role processes (--trainers {counts['trainers']}, "
                         f"--pservers {counts['pservers']}) are more than this machine can "
                         f"start: at most {limit} ({why})")


def run_script(script: str, args: Sequence[str]) -> int:
    """Run ``script`` as ``__main__`` in this process; its exit status."""
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
