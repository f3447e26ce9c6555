"""`fluid.Program`, `@fluid.network` and `@fluid.Input`: classes whose methods compile.

Subclass `Program`, mark methods with ``@fluid.network(...)``, call ``Compile()``: each
marked method is traced once, in the order the class defines them, into one block of one
program; the result owns one scope that all methods share.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import ProgramDefinitionError
from ..ir.records import ProgramDesc, ReturnSpec
from ..ir.verify import check_program
from ..runtime.compiled import RESERVED_NAMES, CompiledProgram
from .tracing import TraceContext, error_at
from .variable import Placeholder, Variable

_MARK = "__fluid_network__"
_OWN_NAMES = frozenset({"Compile", "compile", "option_names"})


@dataclass(frozen=True)
class NetworkSpec:
    feeds: Optional[tuple[str, ...]]   # None: taken from the method's parameter names
    is_test: Optional[bool]


def network(*feeds: Any, is_test: Optional[bool] = None) -> Callable:
    """Mark a method to be compiled into a block.

    ``@fluid.network("x", "y")``: the compiled method's arguments feed the data vars
    ``x`` and ``y``. With no names, the method's own parameter names are used.
    ``is_test`` overrides whether dropout / batch-norm run in inference mode (by default a
    block is in training mode exactly when it runs an optimizer).
    """
    if len(feeds) == 1 and callable(feeds[0]) and not isinstance(feeds[0], str):
        return network()(feeds[0])  # used bare: @fluid.network
    for f in feeds:
        if not isinstance(f, str) or not f.isidentifier():
            raise TypeError(f"@fluid.network takes data var names as strings, got {f!r}")

    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, NetworkSpec(tuple(feeds) if feeds else None, is_test))
        return fn
    return mark


def Input(*feeds: str) -> Callable:  # noqa: N802 (the proposal's spelling)
    """``@fluid.Input('x')``: the same as ``@fluid.network('x')``."""
    return network(*feeds)


class Program:
    """Base class of user programs. Class attributes are options that keyword arguments
    override: ``FitALine(batch_size=256)``."""

    _networks: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = [n for n in getattr(super(cls, cls), "_networks", ())]
        for name, value in cls.__dict__.items():
            if getattr(value, _MARK, None) is not None and name not in names:
                names.append(name)
        for name in names:
            if name in RESERVED_NAMES or name in _OWN_NAMES:
                raise ProgramDefinitionError(
                    f"{cls.__name__}.{name}: the name {name!r} belongs to the compiled "
                    f"program's own API; rename the method (reserved names: "
                    f"{', '.join(sorted(RESERVED_NAMES | _OWN_NAMES))})")
        cls._networks = tuple(names)

    def __init__(self, **options: Any) -> None:
        known = self.option_names()
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unknown option(s) "
                            f"{', '.join(unknown)}; its options are the class attributes: "
                            f"{', '.join(known) or 'none'}")
        for key, value in options.items():
            setattr(self, key, value)

    @classmethod
    def option_names(cls) -> list[str]:
        """Plain data class attributes, which keyword options may override."""
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            if klass in (Program, object):
                continue
            for name, value in vars(klass).items():
                if name.startswith("_") or name in names:
                    continue
                if callable(value) or isinstance(value, (classmethod, staticmethod, property)):
                    continue
                names.append(name)
        return names

    def Compile(self, seed: Optional[int] = None, device: Optional[str] = None  # noqa: N802
                ) -> CompiledProgram:
        """Trace every network method and return the live compiled program.

        ``seed`` makes parameter initialisation (and any random op) reproducible;
        ``device`` is 'cpu', 'gpu' or 'auto' (default: `fluid.set_device`'s choice).
        """
        program = trace_program(self)
        return CompiledProgram(program, seed=seed, device=device)

    compile = Compile


def _feed_names(cls_name: str, name: str, fn: Callable, spec: NetworkSpec
                ) -> tuple[list[str], int]:
    params = list(inspect.signature(fn).parameters.values())[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    feeds = list(spec.feeds) if spec.feeds is not None else [p.name for p in positional]
    if positional and len(positional) != len(feeds):
        raise ProgramDefinitionError(
            f"{cls_name}.{name} takes {len(positional)} argument(s) "
            f"({', '.join(p.name for p in positional)}) but its decorator maps "
            f"{len(feeds)} ({', '.join(feeds)}); list one data var name per argument, or "
            f"none to map the method's own parameter names")
    return feeds, len(positional)


def trace_program(instance: Program) -> ProgramDesc:
    """Run every network method of ``instance`` under a fresh trace; return the program."""
    cls = type(instance)
    trace = TraceContext(cls.__name__)
    for name in cls._networks:
        fn = getattr(cls, name)
        spec: NetworkSpec = getattr(fn, _MARK)
        feeds, n_params = _feed_names(cls.__name__, name, fn, spec)
        with trace.method_block(name):
            placeholders = {f: Placeholder(trace, f, name) for f in feeds}
            trace.placeholders = placeholders
            result = fn(instance, *[placeholders[f] for f in feeds[:n_params]])
            block = trace.block
            for f in feeds:
                var = block.vars.get(f)
                if var is None or not var.is_data:
                    raise error_at(ProgramDefinitionError,
                                   f"{cls.__name__}.{name} maps argument {f!r} but never "
                                   f"declares it; add {f} = fluid.layers.data(name={f!r}, "
                                   f"shape=[...], dtype='float32') to the method")
            block.feeds = feeds
            block.returns = _return_spec(result, f"{cls.__name__}.{name}")
            block.is_test = spec.is_test
    check_program(trace.program)
    return trace.program


def _return_spec(value: Any, where: str) -> ReturnSpec:
    if value is None:
        return None
    if isinstance(value, Placeholder):
        value = value.resolve()
    if isinstance(value, Variable):
        value.desc  # raises if the var belongs to another method
        return value.name
    if isinstance(value, (tuple, list)):
        return tuple(_return_spec(v, where) for v in value)
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ProgramDefinitionError(f"{where} returns a dict with key {key!r}; keys "
                                             f"must be strings")
        return {k: _return_spec(v, where) for k, v in value.items()}
    raise ProgramDefinitionError(f"{where} returns {type(value).__name__}; a network method "
                                 f"returns a Variable, a tuple or dict of them, or None")
