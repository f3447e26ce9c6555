"""`launch`, the verb that starts a plan, and `engine_named`, the engines by name."""
from __future__ import annotations

from ..errors import OpArgumentError
from ..passes.transpiler import TranspilePlan
from .engine import Engine
from .program import DistributedProgram
from .server_spec import DEFAULT_TIMEOUT

ENGINES = ("local", "ray")


def engine_named(name: str, **options: object) -> Engine:
    """The engine called ``name`` with its options: ``'local'`` (this process: servers as
    objects, trainers on threads) or ``'ray'`` (servers and trainers as Ray actors)."""
    if name == "local":
        from .local import LocalEngine
        cls: type[Engine] = LocalEngine
    elif name == "ray":
        from .ray_engine import RayEngine
        cls = RayEngine
    else:
        raise OpArgumentError(f"no distributed engine named {name!r}; engines: "
                              f"{', '.join(ENGINES)} (or pass an Engine object)")
    try:
        return cls(**options)
    except TypeError as e:
        raise OpArgumentError(f"engine {name!r}: {e}; see help({cls.__name__})") from None


def launch(plan: TranspilePlan, engine: str | Engine | None = None, *,
           seed: int | None = None, timeout: float = DEFAULT_TIMEOUT,
           **engine_options: object) -> DistributedProgram:
    """Start the trainers and parameter servers of ``plan``; returns a
    `DistributedProgram` with the compiled program's methods, ``parameters()``,
    ``save(dir)`` and ``close()`` (also a context manager).

    ``engine``: ``'local'`` (default), ``'ray'``, or an `Engine` object. ``seed`` (default:
    the compiled program's) and ``timeout`` (seconds a sync step waits for a missing
    trainer; it bounds every call) apply to every engine; other options go to the named
    engine (see `RayEngine`).
    """
    if engine is None or isinstance(engine, str):
        engine = engine_named(engine or "local", **engine_options)
    elif engine_options:
        raise OpArgumentError(f"launch: options {', '.join(engine_options)} belong to the "
                              f"engine; give them to its constructor when you pass an engine "
                              f"object")
    return engine.launch(plan, seed=seed, timeout=timeout)
