"""The settings of the role processes: the environment and ``--distributed``.

One script for every role, as Paddle's scripts did::

    TRAINING_ROLE=PSERVER PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:6174,10.0.0.2:6174 \\
        PADDLE_CURRENT_ENDPOINT=10.0.0.1:6174 PADDLE_TRAINERS_NUM=2 \\
        fluid run main.py --distributed main=train_step
    TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=0 ... python main.py --distributed main=train_step

`role_from_env` and `parse_distributed_arg` read those settings; `roles` acts on them.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import OpArgumentError

ROLES = ("TRAINER", "PSERVER", "LOCAL")
#: The environment's spelling of ``--distributed``.
DISTRIBUTED_VAR = "FLUID_DISTRIBUTED"


@dataclass(frozen=True)
class RoleConfig:
    """Who this process is in a distributed run."""
    role: str = "LOCAL"
    trainer_id: int = 0
    trainers: int = 1
    pservers: tuple[str, ...] = ()
    current_endpoint: str | None = None
    options: dict[str, Any] = field(default_factory=dict)   # from --distributed
    pserver_id: int | None = None                        # PADDLE_PSERVER_ID

    @property
    def distributed(self) -> bool:
        """Whether ``--distributed`` (or ``FLUID_DISTRIBUTED``) asked for a split."""
        return bool(self.options)

    def transpile_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `transpile` (``main`` and friends from the command line,
        trainers and servers from the environment)."""
        kwargs: dict[str, Any] = dict(self.options)
        kwargs.setdefault("trainers", self.trainers)
        if self.pservers:
            kwargs.setdefault("pservers", list(self.pservers))
        return kwargs


def _int(environ: Mapping[str, str], key: str, default: int) -> int:
    raw = environ.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise OpArgumentError(f"environment variable {key}={raw!r} is not an integer") from None


def role_from_env(environ: Mapping[str, str] | None = None,
                  argv: Sequence[str] | None = None) -> RoleConfig:
    """Read ``TRAINING_ROLE`` (TRAINER, PSERVER; LOCAL when unset), ``PADDLE_TRAINER_ID``,
    ``PADDLE_TRAINERS_NUM``, ``PADDLE_PSERVERS_IP_PORT_LIST`` and
    ``PADDLE_CURRENT_ENDPOINT`` (or ``POD_IP`` + ``PADDLE_PORT``, or ``PADDLE_PSERVER_ID``
    as an index), plus ``--distributed`` from ``argv`` (or, without it, the environment
    variable ``FLUID_DISTRIBUTED`` with the same value)."""
    env = os.environ if environ is None else environ
    role = (env.get("TRAINING_ROLE") or env.get("PADDLE_TRAINING_ROLE") or "LOCAL").upper()
    if role not in ROLES:
        raise OpArgumentError(f"TRAINING_ROLE must be one of {', '.join(ROLES)}; got {role!r}")
    pservers = tuple(p.strip() for p in env.get("PADDLE_PSERVERS_IP_PORT_LIST", "").split(",")
                     if p.strip())
    current = env.get("PADDLE_CURRENT_ENDPOINT")
    if not current and env.get("POD_IP") and env.get("PADDLE_PORT"):
        current = f"{env['POD_IP']}:{env['PADDLE_PORT']}"
    trainers = _int(env, "PADDLE_TRAINERS_NUM", 1)
    trainer_id = _int(env, "PADDLE_TRAINER_ID", 0)
    if trainers < 1:
        raise OpArgumentError(f"PADDLE_TRAINERS_NUM must be >= 1; got {trainers}")
    if role == "TRAINER" and not 0 <= trainer_id < trainers:
        raise OpArgumentError(f"PADDLE_TRAINER_ID={trainer_id} is out of range for "
                              f"PADDLE_TRAINERS_NUM={trainers}")
    pserver_id = _int(env, "PADDLE_PSERVER_ID", -1)
    named = current or pserver_id < 0
    if role == "PSERVER" and pservers and named and current not in pservers:
        raise OpArgumentError(f"this pserver's endpoint {current!r} "
                              f"(PADDLE_CURRENT_ENDPOINT, or POD_IP:PADDLE_PORT) is not in "
                              f"PADDLE_PSERVERS_IP_PORT_LIST ({', '.join(pservers)})")
    options = distributed_options(argv if argv is not None else [], env)
    return RoleConfig(role, trainer_id, trainers, pservers, current, options,
                      None if pserver_id < 0 else pserver_id)


def distributed_options(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """``--distributed`` from ``argv`` as transpile keyword arguments or, without the flag,
    the environment variable ``FLUID_DISTRIBUTED`` (the same value); {} without either."""
    options = parse_distributed_arg(argv)
    if not options and environ.get(DISTRIBUTED_VAR):
        options = parse_distributed_arg(["--distributed", environ[DISTRIBUTED_VAR]])
    return options


#: The form of ``--distributed`` (every error about it ends with this).
DISTRIBUTED_FORM = ("--distributed main=METHOD[+METHOD...][,mode=sync|async][,trainers=N]"
                    "[,pservers=N|HOST:PORT;HOST:PORT...][,split_method=round_robin|hash]"
                    "[,slice_var_up=true|false][,min_block_size=N]")


class DistributedArgError(OpArgumentError):
    """A malformed ``--distributed``: one line saying what is wrong and the form expected."""

    def __init__(self, problem: str):
        super().__init__(f"--distributed: {problem}; expected {DISTRIBUTED_FORM}")


def _methods(value: str) -> str | tuple[str, ...]:
    methods = tuple(m for m in value.split("+") if m)
    if not methods or not all(m.isidentifier() for m in methods):
        raise DistributedArgError(f"main={value!r} does not name methods")
    return methods[0] if len(methods) == 1 else methods


def _positive(key: str) -> Any:
    def read(value: str) -> int:
        if not value.isdigit() or int(value) < 1:
            raise DistributedArgError(f"{key}={value!r} is not a positive integer")
        return int(value)
    return read


def _one_of(key: str, choices: tuple[str, ...]) -> Any:
    def read(value: str) -> str:
        if value not in choices:
            raise DistributedArgError(f"{key}={value!r} is not one of {', '.join(choices)}")
        return value
    return read


def _flag(value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0"):
        raise DistributedArgError(f"slice_var_up={value!r} is not true or false")
    return value.lower() in ("true", "1")


def _servers(value: str) -> int | str:
    if value.isdigit():
        return _positive("pservers")(value)
    endpoints = [e for e in value.replace(";", ",").split(",") if e]
    if not endpoints or not all(e.rpartition(":")[2].isdigit() for e in endpoints):
        raise DistributedArgError(f"pservers={value!r} is neither a count nor HOST:PORT "
                                  f"endpoints")
    return ",".join(endpoints)


_READERS: dict[str, Any] = {
    "main": _methods, "mode": _one_of("mode", ("sync", "async")),
    "split_method": _one_of("split_method", ("round_robin", "hash")),
    "trainers": _positive("trainers"), "pservers": _servers, "slice_var_up": _flag,
    "min_block_size": _positive("min_block_size"),
}


def _flag_value(argv: Sequence[str]) -> str | None:
    """The text after ``--distributed`` (or ``--distributed=``); None without the flag."""
    text = None
    args = list(argv)
    for i, a in enumerate(args):
        if a == "--distributed":
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise DistributedArgError("it needs a value")
            text = args[i + 1]
        elif a.startswith("--distributed="):
            text = a.split("=", 1)[1]
    return text


def parse_distributed_arg(argv: Sequence[str]) -> dict[str, Any]:
    """``--distributed main=train_step,mode=async`` (or ``--distributed=...``) as transpile
    keyword arguments; ``main=d_step+g_step`` names several methods. {} without the flag;
    `DistributedArgError` (one line, with the form expected) when it is malformed."""
    text = _flag_value(argv)
    if text is None:
        return {}
    out: dict[str, Any] = {}
    # ';' separates endpoints inside pservers=, so it never separates options.
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if key not in _READERS:
            if not sep and "pservers" in out and ":" in item:
                out["pservers"] = _servers(f"{out['pservers']},{item}")
                continue
            raise DistributedArgError(f"{item!r} is not key=value with a known key")
        if not sep:
            raise DistributedArgError(f"{key} needs a value ({key}=...)")
        out[key] = _READERS[key](value)
    if not out:
        raise DistributedArgError("it needs key=value options")
    return out
