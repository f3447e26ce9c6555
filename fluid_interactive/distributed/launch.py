"""Starting a plan (`launch`, engine lookup) and the settings of the role processes.

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


_INT_OPTIONS = ("trainers", "min_block_size")
_BOOL_OPTIONS = ("slice_var_up",)
_KNOWN = ("main", "mode", "split_method", "pservers") + _INT_OPTIONS + _BOOL_OPTIONS


def parse_distributed_arg(argv: Sequence[str]) -> dict[str, Any]:
    """``--distributed main=train_step,mode=async`` (or ``--distributed=...``) as transpile
    keyword arguments; ``main=d_step+g_step`` names several methods. {} without the flag."""
    text = None
    args = list(argv)
    for i, a in enumerate(args):
        if a == "--distributed":
            if i + 1 >= len(args):
                raise OpArgumentError("--distributed needs a value such as main=train_step")
            text = args[i + 1]
        elif a.startswith("--distributed="):
            text = a.split("=", 1)[1]
    if text is None:
        return {}
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in _KNOWN:
            raise OpArgumentError(f"--distributed: cannot read {item!r}; use key=value with "
                                  f"keys {', '.join(_KNOWN)}")
        if key == "main":
            methods = tuple(m for m in value.split("+") if m)
            out[key] = methods[0] if len(methods) == 1 else methods
        elif key in _INT_OPTIONS:
            try:
                out[key] = int(value)
            except ValueError:
                raise OpArgumentError(f"--distributed: {key} must be an integer") from None
        elif key in _BOOL_OPTIONS:
            if value.lower() not in ("true", "false", "1", "0"):
                raise OpArgumentError(f"--distributed: {key} must be true or false")
            out[key] = value.lower() in ("true", "1")
        elif key == "pservers":
            out[key] = int(value) if value.isdigit() else value.replace(";", ",")
        else:
            out[key] = value
    return out


ENGINES = ("local", "ray")


def engine_named(name: str) -> Any:
    """The engine called ``name``: ``'local'`` (this process: servers as objects, trainers
    on threads) or ``'ray'`` (servers and trainers as Ray actors)."""
    if name == "local":
        from .local import LocalEngine
        return LocalEngine()
    if name == "ray":
        from .ray_engine import RayEngine
        return RayEngine()
    raise OpArgumentError(f"no distributed engine named {name!r}; engines: "
                          f"{', '.join(ENGINES)} (or pass an object with launch(plan, ...))")


def launch(plan: Any, engine: Any = None, **options: Any) -> Any:
    """Start the trainers and parameter servers of ``plan``; returns a
    `DistributedProgram` with the compiled program's methods, ``parameters()``,
    ``save(dir)`` and ``close()`` (also a context manager).

    ``engine``: ``'local'`` (default), ``'ray'``, or an object with
    ``launch(plan, **options)``. Options of both engines: ``seed`` (default: the compiled
    program's), ``timeout`` (seconds a sync step waits for a missing trainer; it bounds
    every call); the Ray engine takes more (see `RayEngine.launch`).
    """
    if engine is None or isinstance(engine, str):
        engine = engine_named(engine or "local")
    return engine.launch(plan, **options)
