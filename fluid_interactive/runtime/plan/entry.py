"""The generated entry point of a compiled method: the code that runs on every call before
the block's plan does.

It is generated per method, with one positional parameter per data var, so a call with
NumPy arrays of the declared dtype costs a type check per argument, one dict lookup for
the plan of these shapes, and the plan itself. Anything else (keywords, lists, scalars,
single samples, other dtypes) takes the general path through the feed converters.

Calls from several threads (docs/api.md, "Concurrency"):

* a method that changes state (it writes a persistable var, takes batches from a reader,
  or draws random numbers) runs under its program's lock, so concurrent calls equal some
  sequential order of them, and each reader batch goes to exactly one call;
* a method that changes nothing runs without a lock; each concurrent call takes a lane of
  its own (plans whose buffers share one memory, runtime/plan/runner.py) from a list of
  free lanes, and reads the parameters it needs in one step, so it never sees half of
  another call's update.

A call that fails after taking a reader's batch gives the batch back (`unread`), so a
retry reads the same samples.

With the program's history on (`runtime.history`), the entry of a method that changes state
also reads, before the plan runs, the values the call will replace (one ``itemgetter`` over
the names the method writes), its readers' positions and its random ops' generator states,
and records them after the call committed. With history off those lines are not generated at all.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from ...errors import FluidError
from .sources import compile_source, release_with, source_filename


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def _fast_check(i: int, shape: tuple[int, ...]) -> str:
    """A condition that is False exactly when argument i needs no conversion."""
    if not shape or shape[0] >= 0 or any(d < 0 for d in shape[1:]):
        return "True"
    return (f"type(a{i}) is not ndarray or a{i}.dtype is not d{i} or "
            f"a{i}.shape[1:] != t{i} or a{i}.ndim != {len(shape)}")


def _head(n_feeds: int, feed_shapes: Sequence[tuple[int, ...]], on_device: bool) -> list[str]:
    """The signature, the general path, and the conversion of each argument."""
    params = "".join(f", a{i}=MISSING" for i in range(n_feeds))
    args = ", ".join(f"a{i}" for i in range(n_feeds))
    missing = " or ".join(f"a{i} is MISSING" for i in range(n_feeds))
    lines = [f"def __call__(self{params}, *more, **extra):",
             f"    if more or extra{' or ' + missing if missing else ''}:",
             f"        return self(*bind(({args}{',' if n_feeds == 1 else ''}) + more, extra))"
             if n_feeds else "        return self(*bind(more, extra))"]
    for i, shape in enumerate(feed_shapes):
        lines.append(f"    if {_fast_check(i, shape)}:")
        lines.append(f"        a{i} = c{i}(a{i})")
        if on_device:
            lines.append(f"    a{i} = to_device(a{i})")
    return lines


def _locked_body(n_feeds: int, reads: Sequence[tuple[str, int]], on_device: bool,
                 recorded: Recording | None, rows: bool = False) -> list[str]:
    """Under the program's lock: take each reader's batch, plan, run; give the batches
    back if anything fails. With a ``recorded`` history, keep what the call replaces.
    ``rows``: the plan writes rows in place (ops/row_journal.py): a failed call puts them
    back, a committed one hands them to the history (or forgets them)."""
    lines = ["    with lock:", "        code = None"]
    total, readers = n_feeds, []
    for k, (reader, slots) in enumerate(reads):
        names = [f"a{total + j}" for j in range(slots)]
        total += slots
        # The reader is looked up on each call: loading or reloading a program may put a
        # new one into the scope. An EOFException here ends the call before anything ran.
        lines.append(f"        r{k} = S[{reader!r}]")
        if recorded is not None:
            lines.append(f"        p{k} = r{k}.tell()")
        # take(): a cached reader's batches are read-only views, and kernels never write
        # into their inputs, so no copy is needed (next() would make one).
        lines.append(f"        {', '.join(names)}, = r{k}.take()")
        readers.append(f"r{k}")
        if on_device:
            lines += [f"        {n} = to_device({n})" for n in names]
    every = ", ".join(f"a{i}" for i in range(total))
    key = "(" + "".join(f"a{i}.shape, " for i in range(total)) + ")"
    lines += ["        try:",
              f"            key = {key}",
              "            code = plans_get(key)",
              "            if code is None:",
              f"                code = plan([{every}])",
              "            else:",
              "                used(key)   # for the plan cache's clock"]
    call = f"code.fn(S{', ' if total else ''}{every})"
    if recorded is None:
        lines.append(f"            return {call}")
    else:   # the arrays the call replaces, read before it runs (they are never changed)
        if recorded.streams is not None:   # and where its random ops' streams stand
            lines.append("            g = tell()")
        if recorded.names:
            lines += ["            try:", "                old = take(S)",
                      "            except KeyError:", "                old = take_missing(S)"]
        else:
            lines.append("            old = ()")
        lines.append(f"            result = {call}")
    lines += _failure(readers, rows)
    after = _success(call, lines, reads, recorded, rows)   # may rewrite the plan's call
    return lines + after


def _failure(readers: list[str], rows: bool) -> list[str]:
    """What a failed call does: put back the rows it wrote, give its batches back, and
    report a kernel's error with the op that raised it."""
    if not readers and not rows:
        return ["        except FluidError:",
                "            raise",
                "        except Exception as e:",
                "            raise kernel_error(e, code) from e"]
    return ["        except BaseException as e:",
            *(["            journal.rollback()"] if rows else []),
            *[f"            {r}.unread()" for r in reversed(readers)],
            "            if isinstance(e, Exception) and not isinstance(e, FluidError):",
            "                raise kernel_error(e, code) from e",
            "            raise"]


def _success(call: str, lines: list[str], reads: Sequence[tuple[str, int]],
             recorded: Recording | None, rows: bool) -> list[str]:
    """What a committed call does after the plan: record it in the history (with the rows
    it overwrote in place), or forget those rows."""
    if recorded is not None:
        positions = "".join(f"p{k}, " for k in range(len(reads)))
        positions += "g, " if recorded.streams is not None else ""
        old = "old + (journal.take(),)" if rows else "old"
        return [f"        record({old}, ({positions}), result)", "        return result"]
    if rows:   # the rows need not outlive the call; the plan returned its result
        lines[lines.index(f"            return {call}")] = f"            result = {call}"
        return ["        journal.clear()", "        return result"]
    return []


def _pooled_body(n_feeds: int) -> list[str]:
    """Without a lock: a lane of this call's own (a plan memory no other call uses
    meanwhile), handed back after."""
    every = ", ".join(f"a{i}" for i in range(n_feeds))
    key = "(" + "".join(f"a{i}.shape, " for i in range(n_feeds)) + ")"
    return ["    try:",
            "        lane = lanes.pop()",
            "    except IndexError:",
            "        lane = new_lane()",
            "    code = None",
            "    try:",
            f"        key = {key}",
            "        code = lane.plans.get(key)",
            "        if code is None:",
            f"            code = plan_in(lane, [{every}])",
            "        else:",
            "            lane.used.add(key)   # for the plan cache's clock",
            f"        return code.fn(S{', ' if n_feeds else ''}{every})",
            "    except FluidError:",
            "        raise",
            "    except Exception as e:",
            "        raise kernel_error(e, code) from e",
            "    finally:",
            "        lanes.append(lane)"]


class Recording(NamedTuple):
    """How a call of a method that changes state goes into its program's history:
    ``record(old, positions, result)`` after the call committed, where ``old`` holds the
    values of ``names`` before it and ``positions`` its readers' positions, then, for a
    method whose random ops draw, the state of their ``streams`` (`RandomStreams.tell`)."""
    names: tuple[str, ...]
    record: Callable[[tuple, tuple, Any], None]
    streams: Any = None


def _takers(names: tuple[str, ...]) -> tuple[Callable, Callable]:
    """``take(S)``: the values of ``names`` as a tuple, in one C call (KeyError when one is
    missing); ``take_missing(S)``: the same with None for missing names."""
    def take_missing(values: dict) -> tuple:
        return tuple(map(values.get, names))
    if len(names) < 2:
        return take_missing, take_missing
    return itemgetter(*names), take_missing


def make_entry(n_feeds: int, feed_shapes: list[tuple[int, ...]], dtypes: list[np.dtype],
               converters: list[Callable], bind: Callable, runner: Any,
               values: dict, kernel_error: Callable, to_device: Callable | None,
               lock: Any | None = None, readers: Sequence[tuple[str, int]] = (),
               recorded: Recording | None = None, journal: Any = None) -> Callable:
    """``__call__(self, a0, a1, ...)`` for a method with ``n_feeds`` data vars.

    With a ``lock`` (a method that changes state) the call runs under it and first takes
    the next batch of each reader in ``readers`` ((reader var, slot count) pairs), and
    goes into the history when ``recorded``; without one it runs on a lane of ``runner``
    (see the module docstring). ``journal``: the runner's `RowJournal`, when its plans
    write rows in place (a method that changes state)."""
    on_device = to_device is not None
    lines = _head(n_feeds, feed_shapes, on_device)
    if lock is not None:
        lines += _locked_body(n_feeds, readers, on_device, recorded, journal is not None)
    else:
        assert not readers, "a method that reads a reader changes state: give it a lock"
        assert journal is None, "a method that writes rows changes state: give it a lock"
        assert recorded is None, "a method that changes nothing has no history"
        lines += _pooled_body(n_feeds)
    namespace: dict[str, Any] = {
        "MISSING": MISSING, "ndarray": np.ndarray, "bind": bind, "S": values,
        "plans_get": runner.plans.get, "used": runner.cache.used.add, "plan": runner.plan,
        "lanes": runner.lanes,
        "new_lane": runner.lane, "plan_in": runner.plan_in, "kernel_error": kernel_error,
        "FluidError": FluidError,
        "to_device": to_device, "lock": lock, "journal": journal,
    }
    if recorded is not None:
        namespace["take"], namespace["take_missing"] = _takers(recorded.names)
        namespace["record"] = recorded.record
        if recorded.streams is not None:
            namespace["tell"] = recorded.streams.tell
    for i, (dtype, shape, conv) in enumerate(zip(dtypes, feed_shapes, converters)):
        namespace[f"d{i}"], namespace[f"t{i}"], namespace[f"c{i}"] = dtype, tuple(shape[1:]), conv
    source = "\n".join(lines) + "\n"
    filename = source_filename("entry")
    fn = compile_source(source, filename, namespace)["__call__"]
    release_with(fn, filename)
    return fn
