"""RPC ops of a transpiled trainer program: ``send``, ``send_barrier``, ``recv``,
``fetch_barrier`` (role RPC). Splitting a gradient into row blocks and joining parameter
blocks use the ordinary ``split`` and ``concat`` ops (role Dist).

The kernels know nothing about networks, threads or parameter servers. Each op reads a
*communicator* from its ``Comm`` input: an object the runtime puts in the trainer's scope
as the persistable var ``@COMMUNICATOR@`` (kind ``'communicator'``). It has four methods::

    send(trainer_id, names, arrays, epmap, sync)   # arrays[i] goes to epmap[i] as names[i]
    send_barrier(trainer_id, endpoints)            # this trainer sent everything this step
    recv(trainer_id, names, epmap) -> arrays       # names[i] from epmap[i]
    fetch_barrier(trainer_id, endpoints)           # this trainer fetched everything

Every op also writes the communicator back (``CommOut``, the same object). That makes each
RPC op depend on the one before it, so a block runs them in program order, and, because
they write a persistable var, the planner never drops or constant-folds them. (The specs do
not set ``aliases``: the one input they hand back is the communicator, a scope object that
never comes from the planner's buffer pool and must not be copied.)
"""
from __future__ import annotations

from .registry import register
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots

#: The scope var that holds a trainer's communicator.
COMM_VAR = "@COMMUNICATOR@"
#: The `VarDesc.kind` of that var.
COMM_KIND = "communicator"


def _comm_out(ctx: InferContext) -> None:
    comm = ctx.input("Comm")
    ctx.set_output("CommOut", comm.shape, comm.dtype)


def _check_epmap(ctx: InferContext, slot: str, what: str) -> None:
    epmap = list(ctx.attrs["epmap"])
    n = len(ctx.inputs(slot)) if slot == "X" else ctx.output_count(slot)
    if len(epmap) != n:
        ctx.fail(f"{what} lists {n} var(s) in {slot} but {len(epmap)} endpoint(s) in epmap")


# --- send ---------------------------------------------------------------------------------------

def _send_infer(ctx: InferContext) -> None:
    _check_epmap(ctx, "X", "send")
    names = list(ctx.attrs["send_varnames"])
    if len(names) != len(ctx.inputs("X")):
        ctx.fail(f"send lists {len(ctx.inputs('X'))} var(s) in X but {len(names)} "
                 f"send_varnames")
    _comm_out(ctx)


def _send_kernel(ctx: KernelContext):
    epmap = list(ctx.attrs["epmap"])
    trainer_id = int(ctx.attrs["trainer_id"])
    sync = bool(ctx.attrs["sync_mode"])
    names = list(ctx.attrs["send_varnames"])

    def send(comm, *xs):
        comm.send(trainer_id, names, xs, epmap, sync)
        return comm
    return send


register(OpSpec(
    "send", slots("Comm", "X*"), slots("CommOut"), _send_infer, _send_kernel,
    attrs={"epmap": [], "send_varnames": [], "trainer_id": 0, "sync_mode": True},
    host_access="io",
    doc="Send each X[i] to the parameter server epmap[i] under the name send_varnames[i]. "
        "With sync_mode the communicator may hold the values until send_barrier."))


# --- send_barrier / fetch_barrier ---------------------------------------------------------------

def _barrier_infer(ctx: InferContext) -> None:
    _comm_out(ctx)


def _barrier_kernel(method: str):
    def kernel(ctx: KernelContext):
        endpoints = list(ctx.attrs["endpoints"])
        trainer_id = int(ctx.attrs["trainer_id"])

        def barrier(comm):
            getattr(comm, method)(trainer_id, endpoints)
            return comm
        return barrier
    return kernel


_BARRIER = {"endpoints": [], "trainer_id": 0}
register(OpSpec(
    "send_barrier", slots("Comm"), slots("CommOut"), _barrier_infer,
    _barrier_kernel("send_barrier"), attrs=_BARRIER, host_access="io",
    doc="Tell every listed parameter server that this trainer has sent all of this step's "
        "gradients (sync mode: the servers update once every trainer has)."))
register(OpSpec(
    "fetch_barrier", slots("Comm"), slots("CommOut"), _barrier_infer,
    _barrier_kernel("fetch_barrier"), attrs=_BARRIER, host_access="io",
    doc="Tell every listed parameter server that this trainer has fetched this step's "
        "parameters."))


# --- recv ---------------------------------------------------------------------------------------

def _recv_infer(ctx: InferContext) -> None:
    _check_epmap(ctx, "Out", "recv")
    shapes, dtypes = ctx.attrs["shapes"], ctx.attrs["dtypes"]
    names = ctx.attrs["recv_varnames"]
    n = ctx.output_count("Out")
    if len(shapes) != n or len(dtypes) != n or len(names) != n:
        ctx.fail(f"recv lists {n} var(s) in Out but {len(names)} recv_varnames, "
                 f"{len(shapes)} shape(s) and {len(dtypes)} dtype(s)")
    ctx.set_outputs("Out", [TensorType(tuple(int(d) for d in s), str(t))
                            for s, t in zip(shapes, dtypes)])
    _comm_out(ctx)


def _recv_kernel(ctx: KernelContext):
    epmap = list(ctx.attrs["epmap"])
    trainer_id = int(ctx.attrs["trainer_id"])
    names = list(ctx.attrs["recv_varnames"])
    expected = [(t.shape, t.dtype) for t in ctx.out_slots["Out"]]

    def recv(comm):
        arrays = list(comm.recv(trainer_id, names, epmap))
        if len(arrays) != len(expected):
            raise RuntimeError(f"recv asked for {len(expected)} var(s) and got {len(arrays)}")
        for name, a, (shape, dtype) in zip(names, arrays, expected):
            if tuple(a.shape) != tuple(shape) or a.dtype.name != dtype:
                raise RuntimeError(f"recv of {name!r} got {a.dtype.name}{list(a.shape)}, "
                                   f"expected {dtype}{list(shape)}")
        return (comm, *arrays)
    return recv


register(OpSpec(
    "recv", slots("Comm"), slots("CommOut", "Out*"), _recv_infer, _recv_kernel,
    attrs={"epmap": [], "recv_varnames": [], "shapes": [], "dtypes": [], "trainer_id": 0},
    host_access="io",
    doc="Out[i] = the value of recv_varnames[i] on the parameter server epmap[i] (sync "
        "mode: after that server has applied this step's update)."))
