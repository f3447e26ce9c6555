"""Ops of tables kept on parameter servers (passes/transpiler/tables.py decides which).

A trainer never holds such a table. Its transpiled program reads the rows of its batch
instead and sends back the gradient of those rows only:

``prefetch``
    ``Out[i] = table[Ids[i]]`` for every lookup of the table in a method, from the servers:
    the ids of all the lookups are deduplicated and each server is asked once for the rows
    of its shard. ``RowIds`` lists the distinct ids (sorted; with a padding id, position 0
    is a zero row standing for it) and ``Local[i]`` the position of each id among them,
    which the backward pass reads.
``prefetch_grad``
    the gradient of those rows: ``Out@GRAD`` summed at each id's position, ``[len(RowIds),
    dim]`` (the padding row's is zero).
``send_rows``
    the rows' ids and gradient, cut by shard and handed to the communicator.
``lookup_index``
    in a program loaded from a distributed checkpoint, the row of the saved table that
    holds each id (the table is saved as its live rows, sorted by id, and one zero row
    that unknown ids and the padding id read).

Which server holds an id (``shard_of``): ``'mod'`` (``is_distributed``): server ``id %
shards``, any int64 id; ``'range'`` (``is_sparse``): the server whose row range holds it,
ids in ``[0, capacity)`` as in the single-process table.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_device, to_host
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots

SHARD_RULES = ("mod", "range")


def shard_of(ids: np.ndarray, rule: str, starts: list[int], capacity: int) -> np.ndarray:
    """The shard of each id (int64 ids on the host)."""
    if rule == "mod":
        return np.mod(ids, len(starts))
    bad = (ids < 0) | (ids >= capacity)
    if bad.any():
        raise IndexError(f"id {int(ids[bad][0])} is outside the table of {capacity} rows; a "
                         f"table cut in row ranges (is_sparse=True) takes ids in [0, "
                         f"{capacity}); for hashed ids of any size use is_distributed=True")
    return np.searchsorted(np.asarray(starts[1:], dtype=np.int64), ids, side="right")


def _table_attrs(ctx: KernelContext) -> tuple[str, list[str], list[str], str, list[int], int]:
    a = ctx.attrs
    return (str(a["table"]), list(a["epmap"]), list(a["varnames"]), str(a["shard_rule"]),
            [int(s) for s in a["starts"]], int(a["capacity"]))


# --- prefetch -----------------------------------------------------------------------------------

def _prefetch_infer(ctx: InferContext) -> None:
    ids = ctx.inputs("Ids")
    dim, dtype = int(ctx.attrs["dim"]), str(ctx.attrs["dtype"])
    if len(ctx.attrs["epmap"]) != len(ctx.attrs["varnames"]):
        ctx.fail(f"prefetch lists {len(ctx.attrs['varnames'])} shard(s) in varnames but "
                 f"{len(ctx.attrs['epmap'])} endpoint(s) in epmap")
    if ctx.output_count("Out") != len(ids):
        ctx.fail(f"prefetch reads {len(ids)} Ids but writes {ctx.output_count('Out')} Out")
    ctx.set_outputs("Out", [TensorType(tuple(t.shape[:-1]) + (dim,), dtype) for t in ids])
    if ctx.output_count("Local"):
        ctx.set_outputs("Local", [TensorType(t.shape, "int64") for t in ids])
    if ctx.output_count("RowIds"):
        ctx.set_output("RowIds", (-1,), "int64")   # as many as there are distinct ids
    comm = ctx.input("Comm")
    ctx.set_output("CommOut", comm.shape, comm.dtype)


def distinct_ids(ids: list[np.ndarray], padding: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """(the distinct ids, sorted, with the padding id first when there is one; each ids
    array as positions among them)."""
    flat = [np.asarray(i, dtype=np.int64).reshape(-1) for i in ids]
    uniq, inverse = np.unique(np.concatenate(flat) if flat else np.zeros(0, np.int64),
                              return_inverse=True)
    inverse = inverse.reshape(-1)
    if padding >= 0:
        rest = uniq[uniq != padding]
        position = np.where(uniq == padding, 0, 1 + np.searchsorted(rest, uniq))
        uniq, inverse = np.concatenate([[padding], rest]).astype(np.int64), position[inverse]
    out, at = [], 0
    for f, i in zip(flat, ids):
        out.append(inverse[at:at + f.size].reshape(np.shape(i)).astype(np.int64))
        at += f.size
    return uniq, out


def _prefetch_kernel(ctx: KernelContext):
    xp = ctx.xp
    table, epmap, names, rule, starts, capacity = _table_attrs(ctx)
    dim, dtype = int(ctx.attrs["dim"]), str(ctx.attrs["dtype"])
    padding, grow = int(ctx.attrs["padding_idx"]), bool(ctx.attrs["grow"])
    trainer_id = int(ctx.attrs["trainer_id"])
    with_local = bool(ctx.out_slots.get("Local"))
    with_row_ids = bool(ctx.out_slots.get("RowIds"))

    def prefetch(comm, *ids):
        host = [np.asarray(to_host(i)) for i in ids]
        uniq, local = distinct_ids(host, padding)
        wanted = uniq[1:] if padding >= 0 else uniq
        rows = np.zeros((uniq.size, dim), dtype=dtype)
        shard = shard_of(wanted, rule, starts, capacity)
        asks = [np.flatnonzero(shard == j) for j in range(len(names))]
        got = comm.prefetch(trainer_id, table, names, [wanted[a] for a in asks], epmap, grow)
        first = 1 if padding >= 0 else 0
        for a, r in zip(asks, got):
            rows[first + a] = r
        outs = [to_device(rows[lc.reshape(lc.shape[:-1])], xp) for lc in local]
        result = [comm, *outs]
        if with_local:
            result += [to_device(lc, xp) for lc in local]
        if with_row_ids:
            result.append(to_device(uniq, xp))
        return tuple(result)
    return prefetch


_TABLE_ATTRS = {"table": "", "epmap": [], "varnames": [], "shard_rule": "mod", "starts": [],
                "capacity": 0, "trainer_id": 0}
register(OpSpec(
    "prefetch", slots("Comm", "Ids*"), slots("CommOut", "Out*", "Local*", "RowIds?"),
    _prefetch_infer, _prefetch_kernel,
    attrs={**_TABLE_ATTRS, "dim": 1, "dtype": "float32", "padding_idx": -1, "grow": True},
    host_access="io",
    doc="Out[i] = table[Ids[i]] from the parameter servers holding the table (varnames[j] "
        "on epmap[j]); the padding id reads zeros. grow: the method updates the table, so "
        "an id never seen reads its first value (and counts against the capacity); else "
        "it reads zeros. Local[i]: each id's position in RowIds, the distinct ids."))


# --- prefetch_grad ------------------------------------------------------------------------------

def _prefetch_grad_infer(ctx: InferContext) -> None:
    g = ctx.input("Out@GRAD")
    ctx.set_output("Grad", (-1, g.shape[-1]), g.dtype)


def _prefetch_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    padding = int(ctx.attrs["padding_idx"]) >= 0

    def grad(local, row_ids, g):
        dim = g.shape[-1]
        out = xp.zeros((row_ids.shape[0], dim), dtype=g.dtype)
        xp.add.at(out, local.reshape(-1), g.reshape(-1, dim))
        if padding:
            out[0] = 0
        return out
    return grad


register(OpSpec(
    "prefetch_grad", slots("Local", "RowIds", "Out@GRAD"), slots("Grad"),
    _prefetch_grad_infer, _prefetch_grad_kernel, attrs={"padding_idx": -1},
    doc="Grad[k] = the sum of Out@GRAD over the ids at position k of RowIds (Local: each "
        "id's position): the gradient of the prefetched rows; the padding row's is zero."))


# --- send_rows ----------------------------------------------------------------------------------

def _send_rows_infer(ctx: InferContext) -> None:
    if len(ctx.attrs["epmap"]) != len(ctx.attrs["send_varnames"]):
        ctx.fail(f"send_rows lists {len(ctx.attrs['send_varnames'])} send_varnames but "
                 f"{len(ctx.attrs['epmap'])} endpoint(s) in epmap")
    comm = ctx.input("Comm")
    ctx.set_output("CommOut", comm.shape, comm.dtype)


def _send_rows_kernel(ctx: KernelContext):
    a = ctx.attrs
    epmap, names = list(a["epmap"]), list(a["send_varnames"])
    rule, starts, capacity = str(a["shard_rule"]), [int(s) for s in a["starts"]], \
        int(a["capacity"])
    trainer_id, first = int(a["trainer_id"]), 1 if int(a["padding_idx"]) >= 0 else 0

    def send_rows(comm, row_ids, grad):
        ids = np.asarray(to_host(row_ids), dtype=np.int64)[first:]
        values = np.asarray(to_host(grad))[first:]
        shard = shard_of(ids, rule, starts, capacity)
        parts = [np.flatnonzero(shard == j) for j in range(len(names))]
        # every shard hears from every trainer each step, rows or none, so each runs its
        # update (and advances its step counters) as one process does every step
        comm.send_rows(trainer_id, names, [ids[p] for p in parts], [values[p] for p in parts],
                       epmap)
        return comm
    return send_rows


register(OpSpec(
    "send_rows", slots("Comm", "RowIds", "Grad"), slots("CommOut"), _send_rows_infer,
    _send_rows_kernel,
    attrs={"table": "", "epmap": [], "send_varnames": [], "shard_rule": "mod", "starts": [],
           "capacity": 0, "trainer_id": 0, "padding_idx": -1, "sync_mode": True},
    host_access="io",
    doc="Send the gradient rows Grad of the ids RowIds to the servers holding them: the "
        "rows of shard j go to epmap[j] as send_varnames[j] (ids and values; none is "
        "sent for a padding row)."))


# --- lookup_index -------------------------------------------------------------------------------

def _lookup_index_infer(ctx: InferContext) -> None:
    ctx.set_output("Out", ctx.input("Ids").shape, "int64")


def _lookup_index_kernel(ctx: KernelContext):
    xp = ctx.xp
    missing, padding = int(ctx.attrs["missing"]), int(ctx.attrs["padding_idx"])
    strict, table = bool(ctx.attrs["strict"]), str(ctx.attrs["table"])

    def lookup_index(keys, ids):
        k = np.asarray(to_host(keys), dtype=np.int64)
        i = np.asarray(to_host(ids), dtype=np.int64)
        at = np.minimum(np.searchsorted(k, i), max(k.size - 1, 0))
        found = (k[at] == i) if k.size else np.zeros(i.shape, bool)
        unknown = ~found & (i != padding)
        if strict and unknown.any():
            raise KeyError(
                f"table {table!r} was saved with the rows its servers had seen, and id "
                f"{int(i[unknown][0])} is not among them; this program reads unknown ids as "
                f"zeros at inference only. Continue training on parameter servers "
                f"(launch(plan) and load(path)), which make new rows")
        return xp.asarray(np.where(found & (i != padding), at, missing).astype(np.int64))
    return lookup_index


register(OpSpec(
    "lookup_index", slots("Keys", "Ids"), slots("Out"), _lookup_index_infer,
    _lookup_index_kernel,
    attrs={"table": "", "missing": 0, "padding_idx": -1, "strict": False}, host_access="io",
    doc="Out = the position of each id in the sorted Keys, or `missing` (the zero row) for "
        "the padding id and, unless strict (training), for ids not in Keys."))

