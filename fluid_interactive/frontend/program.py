"""`fluid.Program`, `@fluid.network` and `@fluid.Input`: classes whose methods compile.

Subclass `Program`, mark methods with ``@fluid.network(...)``, call ``Compile()``: each
marked method is traced once, in the order the class defines them, into one block of one
program; the result owns one scope that all methods share.
"""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..distributed.roles import ToSplit, distribute_if_requested, distribution_requested
from ..errors import NotCompiledError, ProgramDefinitionError
from ..ir.records import ProgramDesc, ReturnSpec, SourceLoc
from ..ir.source import format_location
from ..passes.verify import check_program
from ..runtime import CompiledProgram, Origin, Traced, reserved_names
from ..runtime.live.compiled import check_seed
from ..util.gc_pause import gc_paused
from .layers.helpers import as_variable
from .tracing import TraceContext, is_tracing
from .variable import Placeholder, Variable

_MARK = "__fluid_network__"
_OWN_NAMES = frozenset({"Compile", "compile", "option_names"})


@dataclass(frozen=True)
class NetworkSpec:
    feeds: tuple[str, ...] | None   # None: taken from the method's parameter names
    is_test: bool | None


def network(*feeds: Any, is_test: bool | None = None) -> Callable:
    """Mark a method to be compiled into a block.

    ``@fluid.network("x", "y")``: the compiled method's arguments feed the data vars
    ``x`` and ``y``. With no names, the method's own parameter names are used.
    ``is_test`` overrides whether dropout / batch-norm run in inference mode (by default a
    block is in training mode exactly when it runs an optimizer).
    """
    if len(feeds) == 1 and callable(feeds[0]) and not isinstance(feeds[0], str):
        return network()(feeds[0])  # used bare: @fluid.network
    for f in feeds:
        if not isinstance(f, str) or not f:
            raise ProgramDefinitionError(f"@fluid.network takes data var names as strings, "
                                         f"e.g. @fluid.network('x', 'y'); got {f!r}")
    if len(set(feeds)) != len(feeds):
        raise ProgramDefinitionError(f"@fluid.network{feeds!r} names a data var twice")

    def mark(fn: Callable) -> Callable:
        method = _traced_only(fn)
        setattr(method, _MARK, NetworkSpec(tuple(feeds) if feeds else None, is_test))
        return method
    return mark


def _traced_only(fn: Callable) -> Callable:
    """``fn`` as a method that runs only while `Compile()` traces it: called on the plain
    instance it explains that the program must be compiled first."""
    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_tracing():
            cls, name = type(self).__name__, fn.__name__
            var = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls).lower()
            var = var if var.isidentifier() and var != cls else "prog"
            raise NotCompiledError(
                f"{cls}.{name}() was called on a {cls} instance, which only describes the "
                f"program; compile it first and call the compiled method:\n"
                f"    {var} = {cls}().Compile()\n    {var}.{name}(...)")
        return fn(self, *args, **kwargs)
    return method


def Input(*feeds: str) -> Callable:
    """``@fluid.Input('x')``: the same as ``@fluid.network('x')``."""
    return network(*feeds)


def _reserved_names() -> frozenset[str]:
    """Names a network method may not take: the compiled program's API and our own."""
    return frozenset(reserved_names() | _OWN_NAMES)


def _network_names(cls: type) -> list[str]:
    """Marked methods, base classes first, each in class-definition order; a method that a
    subclass overrides keeps its place and counts only if the override is marked too."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if getattr(value, _MARK, None) is not None and name not in names:
                names.append(name)
    return [n for n in names if getattr(getattr(cls, n, None), _MARK, None) is not None]


def _check_method_name(cls: type, name: str) -> None:
    reserved = _reserved_names()
    if name.startswith("_") or name in reserved:
        raise ProgramDefinitionError(
            f"{cls.__name__}.{name}: a @fluid.network method becomes an attribute of the "
            f"compiled program, and {name!r} is "
            f"{'private' if name.startswith('_') else 'part of its own API'}; rename the "
            f"method (names may not start with '_'; reserved: {', '.join(sorted(reserved))})"
            f"{_def_site(getattr(cls, name))}")


def _def_site(fn: Callable) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return ""
    return f"\n  at {format_location(SourceLoc(code.co_filename, code.co_firstlineno))}"


_class_listeners: list[Callable[[type], None]] = []


def on_class_defined(listener: Callable[[type], None], add: bool = True) -> None:
    """Call ``listener(cls)`` whenever a `Program` subclass is defined, at the class
    statement (``add=False`` removes it). The notebook extension recompiles live programs
    of a redefined class this way, so code below the class statement in the same cell
    already runs the new program. A listener must not raise."""
    if add and listener not in _class_listeners:
        _class_listeners.append(listener)
    elif not add and listener in _class_listeners:
        _class_listeners.remove(listener)


class Program:
    """Base class of user programs: subclass it, mark methods with ``@fluid.network``, and
    ``Compile()`` an instance into a live program whose methods share one scope.

    Each ``@fluid.network`` method is traced once, when the program compiles, into a block
    of ops; ``@fluid.network("x", "y")`` maps the call's arguments to the data vars the
    method declares. Class attributes are options that keyword arguments override
    (``FitALine(batch_size=256)``); layers inside the same ``fluid.var_scope`` share their
    parameters across methods. Example::

        import numpy as np
        import fluid

        class FitALine(fluid.Program):
            learning_rate = 0.01

            @fluid.network("x", "y")
            def train_step(self, x, y):
                x = fluid.layers.data(name="x", shape=[13], dtype="float32")
                y = fluid.layers.data(name="y", shape=[1], dtype="float32")
                with fluid.var_scope("prediction"):
                    y_predict = fluid.layers.fc(input=x, size=1)
                loss = fluid.layers.mean(fluid.layers.square_error_cost(y_predict, y))
                fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(loss)
                return loss

            @fluid.network("x")
            def infer(self, x):
                x = fluid.layers.data(name="x", shape=[13], dtype="float32")
                with fluid.var_scope("prediction"):
                    return fluid.layers.fc(input=x, size=1)

        prog = FitALine(learning_rate=0.05).Compile(seed=0)
        x = np.random.rand(64, 13).astype("float32")
        loss = prog.train_step(x, x.sum(axis=1, keepdims=True))   # a float
        y = prog.infer(x[:4])                                      # an array [4, 1]
        prog.summary()        # the layers; prog.watch("prediction") keeps their values

    See docs/getting-started.md and, in a notebook, docs/notebook.md."""

    _networks: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = _network_names(cls)
        for name in names:
            _check_method_name(cls, name)
        cls._networks = tuple(names)
        for listener in list(_class_listeners):
            listener(cls)

    def __init__(self, **options: Any) -> None:
        known = self.option_names()
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unknown option(s) "
                            f"{', '.join(unknown)}; its options are the class attributes: "
                            f"{', '.join(known) or 'none (define class attributes to add some)'}")
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

    def Compile(self, seed: int | None = None, device: str | None = None
                ) -> CompiledProgram:
        """Trace every network method and return the live compiled program.

        ``seed`` makes parameter initialisation (and any random op) reproducible;
        ``device`` is 'cpu', 'gpu' or 'auto' (default: `fluid.set_device`'s choice).

        When the script runs with ``--distributed main=train_step`` (or the environment
        variable ``FLUID_DISTRIBUTED``), the program is transpiled and what comes back
        depends on ``TRAINING_ROLE`` (docs/distributed.md): a program whose ``main``
        method runs as a trainer against parameter servers, or, for a parameter server,
        nothing: it serves until the trainers are done and ends the script.
        """
        options = {k: v for k, v in vars(self).items() if k in self.option_names()}
        # Where the program came from, so it can be recompiled from a redefined class
        # (by tracing it again: `retrace`, which never distributes).
        origin = Origin(type(self), options, {"seed": seed, "device": device}, retrace)
        with gc_paused():   # a large program: keep tracing linear in its size
            traced = _traced(self)
            if distribution_requested():   # each role compiles its own part only
                return distribute_if_requested(ToSplit(traced.program, check_seed(seed), device))
            compiled = CompiledProgram(traced.program, seed=seed, device=device,
                                       initial_values=traced.initial_values, origin=origin)
        traced.attach(compiled)
        return distribute_if_requested(compiled)

    compile = Compile


@dataclass(frozen=True)
class _Binding:
    """How a traced method is called: the data vars its compiled form feeds, and which
    of them the Python method receives positionally and by keyword."""
    feeds: list[str]
    positional: list[str]
    keywords: dict[str, str]   # parameter name -> data var name


def _binding(cls_name: str, name: str, fn: Callable, spec: NetworkSpec) -> _Binding:
    params = list(inspect.signature(fn).parameters.values())[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required_kw = [p for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if spec.feeds is None:   # the method's own required parameter names
        pos = [p.name for p in positional if p.default is p.empty]
        kw = {p.name: p.name for p in required_kw}
        return _Binding(pos + list(kw), pos, kw)
    feeds = list(spec.feeds)
    required = [p for p in positional if p.default is p.empty]
    if required_kw or (positional and not len(required) <= len(feeds) <= len(positional)):
        raise ProgramDefinitionError(
            f"{cls_name}.{name} takes argument(s) ({', '.join(p.name for p in params)}) but "
            f"its decorator maps {len(feeds)} data var(s) ({', '.join(feeds)}); give the "
            f"method one positional parameter per mapped name (extra ones need defaults), "
            f"or none at all{_def_site(fn)}")
    return _Binding(feeds, feeds if positional else [], {})


def _check_feeds(trace: TraceContext, where: str, feeds: list[str], fn: Callable) -> None:
    """Every mapped name is a data var of the block, and every data var is fed."""
    block = trace.block
    for f in feeds:
        var = block.vars.get(f)
        if var is None or not var.is_data:
            raise ProgramDefinitionError(
                f"{where} maps argument {f!r} but never declares it; add {f} = "
                f"fluid.layers.data(name={f!r}, shape=[...], dtype='float32') to the "
                f"method{_def_site(fn)}")
    written = {n for op in block.ops for n in op.output_names()}
    for var in block.vars.values():
        if var.is_data and var.name not in feeds and var.name not in written:
            loc = trace.data_locs.get(var.name)
            site = f"\n  at {format_location(loc)}" if loc else _def_site(fn)
            raise ProgramDefinitionError(
                f"{where} declares data var {var.name!r} but no argument feeds it; map it "
                f"with @fluid.network({', '.join(repr(f) for f in feeds + [var.name])}) and "
                f"pass it when calling the method{site}")


def retrace(cls: type, options: Mapping[str, Any]) -> Traced:
    """``cls(**options)`` traced, for recompiling a live program from an edited class."""
    with gc_paused():
        return _traced(cls(**options))


def _traced(instance: Program) -> Traced:
    trace = trace_methods(instance)

    def attach(compiled: CompiledProgram) -> None:
        for reader in trace.readers:   # their reset() reaches this program's readers
            reader.bind(compiled)
    return Traced(trace.program, trace.initial_values, attach)


def trace_program(instance: Program) -> ProgramDesc:
    """Run every network method of ``instance`` under a fresh trace; return the program."""
    return trace_methods(instance).program


def trace_methods(instance: Program) -> TraceContext:
    """Run every network method of ``instance`` under a fresh trace; return the trace (the
    program, the readers it created and the arrays its state starts from)."""
    cls = type(instance)
    trace = TraceContext(cls.__name__)
    for name in cls._networks:
        fn = getattr(cls, name)
        spec: NetworkSpec = getattr(fn, _MARK)
        binding = _binding(cls.__name__, name, fn, spec)
        where = f"{cls.__name__}.{name}()"
        with trace.method_block(name):
            ph = {f: Placeholder(trace, f, name) for f in binding.feeds}
            trace.placeholders = ph
            result = fn(instance, *[ph[f] for f in binding.positional],
                        **{k: ph[f] for k, f in binding.keywords.items()})
            _check_feeds(trace, where, binding.feeds, fn)
            block = trace.block
            block.feeds = list(binding.feeds)
            block.returns = _return_spec(result, where)
            block.is_test = spec.is_test
    check_program(trace.program)
    return trace


def _return_spec(value: Any, where: str) -> ReturnSpec:
    if value is None:
        return None
    if isinstance(value, Variable):
        var = as_variable(value, f"the value {where} returns")
        return var.desc.name   # .desc: an error if the var belongs to another method
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
