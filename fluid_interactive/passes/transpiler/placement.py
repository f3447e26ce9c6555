"""Step 3: placing parameter blocks on parameter servers.

Only parameter blocks are dispatched; a gradient block (and every accumulator block) goes
wherever its parameter block went. (Paddle dispatched gradient and parameter names in two
separate passes, which with name hashing could put gradient block i on one server and
parameter block i on another.)

``round_robin`` deals the blocks out in order; ``hash`` uses CRC-32 of the block's name,
which, unlike Python's salted ``hash()``, is the same in every process and on every machine.
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence

from ...errors import OpArgumentError

SPLIT_METHODS = ("round_robin", "hash")


def stable_hash(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


def dispatch(block_names: Sequence[str], endpoints: Sequence[str], method: str) -> list[str]:
    """The endpoint of each block, in order."""
    if method == "round_robin":
        return [endpoints[i % len(endpoints)] for i in range(len(block_names))]
    if method == "hash":
        return [endpoints[stable_hash(n) % len(endpoints)] for n in block_names]
    raise OpArgumentError(f"split_method must be one of {', '.join(SPLIT_METHODS)}; "
                          f"got {method!r}")


DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6174


def endpoints_from(pservers) -> list[str]:
    """``2`` -> two local endpoints; ``"a:1,b:2"`` or ``["a:1", "b:2"]`` -> as given."""
    if isinstance(pservers, bool):
        raise OpArgumentError(f"pservers must be a count or a list of 'host:port' "
                              f"endpoints; got {pservers!r}")
    if isinstance(pservers, int):
        if pservers < 1:
            raise OpArgumentError(f"pservers must be at least 1; got {pservers}")
        return [f"{DEFAULT_HOST}:{DEFAULT_PORT + i}" for i in range(pservers)]
    if isinstance(pservers, str):
        pservers = [p.strip() for p in pservers.split(",") if p.strip()]
    try:
        eps = [str(p) for p in pservers]
    except TypeError:
        raise OpArgumentError(f"pservers must be a count or a list of 'host:port' "
                              f"endpoints; got {pservers!r}") from None
    if not eps:
        raise OpArgumentError("pservers lists no endpoint")
    for ep in eps:
        host, sep, port = ep.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OpArgumentError(f"pserver endpoint {ep!r} is not of the form 'host:port'")
    dups = sorted({e for e in eps if eps.count(e) > 1})
    if dups:
        raise OpArgumentError(f"pserver endpoint(s) listed twice: {', '.join(dups)}")
    return eps
