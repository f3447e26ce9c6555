"""The ``%fluid`` line magic and the ``%%fluid`` cell magic.

    %fluid programs                   live compiled programs: class, blocks, parameters, bytes
    %fluid vars PROG                  PROG's scope: name, shape, dtype, bytes, device, min/max/mean
    %fluid graph PROG[.method]        draw a program or one method's block
    %fluid summary PROG[.method]      the layers: output shapes, parameter counts, totals
    %fluid inspect PROG[.method]      the last call's watched activations and gradients
    %fluid device [cpu|gpu|auto]      where new compiles run (no argument: show it)
    %fluid explore [PROG]             the variable explorer widget
    %fluid live [on|off]              recompile live programs when their class is redefined
    %fluid traceback [user|full]      hide (default) or show fluid's own frames in errors
    %fluid history [PROG] [--all]     the changes PROG can rewind, newest first
    %fluid rewind [N] [PROG]          take back PROG's last N changes (default 1)

    %%fluid [--as NAME] [--seed N] [--forward-only] [--ops] [--collapse-grads] [--no-graph]
    class Net(fluid.Program): ...     runs the cell, compiles each Program subclass it
                                      defines and shows its graph

Imported only by `fluid.ipython` when the extension loads.
"""
from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from fluid_interactive.backend import get_device, set_device
from fluid_interactive.errors import FluidError
from fluid_interactive.ir import ProgramDesc
from fluid_interactive.runtime.live.compiled import CompiledMethod, CompiledProgram

from . import display as fdisplay
from . import live
from .var_stats import programs_table, vars_table

__all__ = ["FluidMagics"]

_COMMANDS = ("programs", "vars", "graph", "summary", "inspect", "device", "explore", "live",
             "traceback", "history", "rewind")


@magics_class
class FluidMagics(Magics):
    shell: InteractiveShell  # Magics allows None; the extension always passes its shell

    def __init__(self, shell: InteractiveShell, state: Any):
        super().__init__(shell)
        self._state = state

    # --- helpers ------------------------------------------------------------------------------

    def _eval(self, expr: str, what: str) -> Any:
        __tracebackhide__ = True
        if not re.fullmatch(r"[A-Za-z_][\w.]*(\[[^\]]+\])?", expr):
            raise UsageError(f"%fluid {what}: expected a variable name such as my_prog or "
                             f"my_prog.train_step; got {expr!r}")
        try:
            return eval(expr, self.shell.user_ns)
        except Exception as exc:
            raise UsageError(f"%fluid {what}: cannot evaluate {expr!r}: "
                             f"{type(exc).__name__}: {exc}") from None

    def _program(self, expr: str | None, what: str) -> CompiledProgram:
        __tracebackhide__ = True
        if not expr:
            raise UsageError(f"%fluid {what} needs a compiled program, e.g. %fluid {what} "
                             f"my_prog")
        obj = self._eval(expr, what)
        if not isinstance(obj, CompiledProgram):
            raise UsageError(f"%fluid {what}: {expr} is a {type(obj).__name__}, not a compiled "
                             f"program (the result of Compile() or fluid.load)")
        return obj

    # --- %fluid ------------------------------------------------------------------------------

    @magic_arguments()
    @argument("command", choices=_COMMANDS, help="what to show or set")
    @argument("target", nargs="?", default=None,
              help="a program (PROG or PROG.method), a device, on/off, or a count")
    @argument("more", nargs="?", default=None, help="rewind: the program or the count")
    @argument("--forward-only", action="store_true",
              help="graph: leave out backward and optimizer ops")
    @argument("--collapse-grads", action="store_true",
              help="graph: one node for all backward and one for all optimizer ops")
    @argument("--dot", action="store_true", help="graph: print the DOT text instead")
    @argument("--ops", action="store_true", help="graph: one node per op, not per layer")
    @argument("--all", action="store_true", help="history: every change, not the newest 20")
    @line_magic
    def fluid(self, line: str = "") -> Any:
        """Inspect and steer fluid programs; see ``%fluid?`` for the subcommands."""
        __tracebackhide__ = True
        if not line.strip():
            raise UsageError("%fluid needs a subcommand: " + ", ".join(_COMMANDS) +
                             " (see %fluid?)")
        args = parse_argstring(self.fluid, line)
        if args.more is not None and args.command != "rewind":
            raise UsageError(f"%fluid {args.command}: unexpected argument {args.more!r}")
        return getattr(self, "_cmd_" + args.command)(args)

    def _no_target(self, args: Any) -> None:
        if args.target is not None:
            raise UsageError(f"%fluid {args.command} takes no argument; got {args.target!r}")

    def _cmd_programs(self, args: Any) -> Any:
        self._no_target(args)
        return programs_table(live.named_live_programs(self.shell.user_ns))

    def _cmd_vars(self, args: Any) -> Any:
        prog = self._program(args.target, "vars")
        return vars_table(prog, title=f"{args.target}: {len(prog.var_names())} persistable vars")

    def _cmd_graph(self, args: Any) -> Any:
        __tracebackhide__ = True
        if not args.target:
            raise UsageError("%fluid graph needs a program or method, e.g. %fluid graph "
                             "my_prog or %fluid graph my_prog.train_step")
        obj = self._eval(args.target, "graph")
        if not isinstance(obj, (CompiledProgram, CompiledMethod, ProgramDesc)):
            raise UsageError(f"%fluid graph: {args.target} is a {type(obj).__name__}; give a "
                             f"compiled program, one of its methods, or a ProgramDesc")
        g = fdisplay.graph(obj, forward_only=args.forward_only,
                           detail="ops" if args.ops or args.collapse_grads else "layers",
                           collapse_grads=True if args.collapse_grads else None)
        if args.dot:
            print(g.dot)
            return None
        return g

    def _program_or_method(self, args: Any) -> tuple[CompiledProgram, str | None]:
        __tracebackhide__ = True
        what = args.command
        if not args.target:
            raise UsageError(f"%fluid {what} needs a compiled program or one of its methods, "
                             f"e.g. %fluid {what} my_prog or %fluid {what} my_prog.train_step")
        obj = self._eval(args.target, what)
        if isinstance(obj, CompiledMethod) and isinstance(obj.owner, CompiledProgram):
            return obj.owner, obj.block.name
        if isinstance(obj, CompiledProgram):
            return obj, None
        raise UsageError(f"%fluid {what}: {args.target} is a {type(obj).__name__}; give a "
                         f"compiled program or one of its methods")

    def _cmd_summary(self, args: Any) -> Any:
        prog, method = self._program_or_method(args)
        return prog.summary(method)

    def _cmd_inspect(self, args: Any) -> Any:
        from .inspection import inspect
        prog, method = self._program_or_method(args)
        return inspect(prog, method)

    def _cmd_device(self, args: Any) -> Any:
        if args.target is None:
            print(f"fluid: new programs compile for {get_device()}")
            return None
        if args.target not in ("cpu", "gpu", "auto"):
            raise UsageError(f"%fluid device takes cpu, gpu or auto; got {args.target!r}")
        try:
            chosen = set_device(args.target)
        except (RuntimeError, ValueError) as exc:
            raise UsageError(f"%fluid device {args.target}: {exc}") from None
        print(f"fluid: new programs compile for {chosen}; live programs keep their device")
        return None

    def _cmd_explore(self, args: Any) -> Any:
        from .widgets import explore
        prog = self._program(args.target, "explore") if args.target else None
        return explore(prog)

    def _on_off(self, args: Any) -> bool | None:
        if args.target is None:
            return None
        if args.target not in ("on", "off"):
            raise UsageError(f"%fluid {args.command} takes on or off; got {args.target!r}")
        return args.target == "on"

    def _cmd_live(self, args: Any) -> Any:
        enabled = live.live_reload(self._on_off(args))
        print(f"fluid: live reload is {'on' if enabled else 'off'}: redefining a Program "
              f"class {'recompiles' if enabled else 'leaves'} its live compiled programs"
              f"{'' if enabled else ' as they are'}")
        return None

    def _cmd_traceback(self, args: Any) -> Any:
        if args.target not in (None, "user", "full"):
            raise UsageError(f"%fluid traceback takes user or full; got {args.target!r}")
        if args.target is not None:
            self._state.full_tracebacks = args.target == "full"
        shown = ("every frame" if self._state.full_tracebacks else
                 "your code only (%fluid traceback full shows fluid's frames too)")
        print(f"fluid: tracebacks show {shown}")
        return None

    def _cmd_history(self, args: Any) -> Any:
        from .timetravel import history_table
        rows = 0 if args.all else 20
        if args.target is not None:
            return history_table(args.target, self._program(args.target, "history"), rows)
        return self._with_history(lambda label, prog: history_table(label, prog, rows),
                                  "history")

    def _cmd_rewind(self, args: Any) -> Any:
        __tracebackhide__ = True
        words = [w for w in (args.target, args.more) if w is not None]
        counts = [w for w in words if w.isdigit()]
        names = [w for w in words if not w.isdigit()]
        if len(counts) > 1 or len(names) > 1:
            raise UsageError(f"%fluid rewind takes a count and a program, e.g. %fluid rewind "
                             f"10 my_prog; got {' '.join(words)!r}")
        n = int(counts[0]) if counts else 1

        def rewind(label: str, prog: CompiledProgram) -> None:
            try:
                report = prog.rewind(n)
            except FluidError as exc:
                raise UsageError(f"%fluid rewind {label}: {exc}") from None
            report.label = label
            print(report)
        if names:
            return rewind(names[0], self._program(names[0], "rewind"))
        return self._with_history(rewind, "rewind")

    def _with_history(self, action: Any, what: str) -> Any:
        from .timetravel import pick_program
        try:
            label, prog = pick_program(live.named_live_programs(self.shell.user_ns), what)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return action(label, prog)

    # --- %%fluid -----------------------------------------------------------------------------

    @magic_arguments()
    @argument("--as", dest="name", default=None,
              help="bind the compiled program to this name (one class in the cell)")
    @argument("--seed", type=int, default=None, help="seed for Compile()")
    @argument("--forward-only", action="store_true", help="draw forward ops only")
    @argument("--ops", action="store_true", help="draw one node per op, not per layer")
    @argument("--collapse-grads", action="store_true",
              help="draw op by op, with backward and optimizer ops as one node each")
    @argument("--no-graph", action="store_true", help="compile only, draw nothing")
    # IPython types cell_magic's result as `_F | Callable[[_F], _F]` whatever the argument, so
    # mypy cannot see that a name argument gives a decorator
    @cell_magic("fluid")  # type: ignore[arg-type]
    def fluid_cell(self, line: str, cell: str) -> None:
        """Run the cell, then compile every fluid.Program subclass it defines and draw it.

        The cell runs once, in the user namespace, as part of this cell's execution (cell
        hooks fire once). A compile error points at the line of the cell.
        """
        __tracebackhide__ = True
        args = parse_argstring(self.fluid_cell, line)
        if args.name is not None and not args.name.isidentifier():
            raise UsageError(f"%%fluid --as takes a variable name; got {args.name!r}")
        shell = self.shell
        before = live.program_classes(shell.user_ns)
        source = shell.transform_cell(cell)
        filename = shell.compile.cache(source, shell.execution_count, raw_code=cell)
        code = shell.compile(source, filename, "exec")
        exec(code, shell.user_global_ns, shell.user_ns)
        after = live.program_classes(shell.user_ns)
        defined = [cls for name, cls in after.items() if before.get(name) is not cls]
        if args.name is not None and len(defined) != 1:
            raise UsageError(f"%%fluid --as {args.name}: the cell must define exactly one "
                             f"fluid.Program subclass; it defined {len(defined)}")
        for cls in defined:
            compiled = cls().Compile(seed=args.seed)
            if args.name is not None:
                shell.user_ns[args.name] = compiled
            if not args.no_graph:
                display(fdisplay.graph(
                    compiled, forward_only=args.forward_only,
                    detail="ops" if args.ops or args.collapse_grads else "layers",
                    collapse_grads=True if args.collapse_grads else None))
