"""Step 1: reading a method block's op roles.

Placement is decided by roles alone, never by op types:

* an op whose role has the Optimize bit (and not LRSched) updates one parameter: its
  ``op_role_var`` names the (param, grad) pair, and it goes to the parameter server that
  owns the parameter's block. This covers the update op itself, weight decay, per-parameter
  learning-rate scaling and anything else an optimizer created for that pair. An Optimize op
  without ``op_role_var`` joins the group of an Optimize op it exchanges a var with; one
  naming several pairs is a joint op (joints.py);
* an op with the LRSched bit (a learning-rate schedule) is copied to every parameter server
  that runs updates of the method;
* every other op (forward, backward, loss, ...) stays on the trainer.

What an update group touches is then sorted by the vars themselves: the parameter, the
gradient (which the trainer sends), persistable vars the group writes (the parameter's
accumulators: they travel with the parameter), persistable vars it only reads (learning
rates: replicated on every server), other values of the trainer it reads (a learning rate
fed as an argument: sent along with the gradient), and temporaries it writes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ProgramDefinitionError
from ...ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from ...ir.text import format_op
from .joints import Joint, check_joint, collect_joints, feeding_ops, needs_whole


@dataclass
class UpdateGroup:
    """The optimize-role ops of one (param, grad) pair in one method."""
    method: str
    param: str
    grad: str
    ops: list[int] = field(default_factory=list)      # op indices in the method block
    state: list[str] = field(default_factory=list)    # persistables written (accumulators)
    shared: list[str] = field(default_factory=list)   # persistables only read (learning rates)
    lr_inputs: list[str] = field(default_factory=list)  # LR-schedule results it reads
    side: list[str] = field(default_factory=list)     # other trainer values it reads (a fed
                                                      # learning rate): sent with the gradient
    temps: list[str] = field(default_factory=list)    # method-block vars it writes
    joint_inputs: list[str] = field(default_factory=list)  # results of joint ops it reads
    joint_feeds: list[int] = field(default_factory=list)   # its ops whose results joints read
    whole: bool = False      # the update reads the parameter whole: never cut it (joints.py)


@dataclass
class MethodRoles:
    method: str
    block_idx: int
    groups: list[UpdateGroup]
    lr_ops: list[int]
    lr_temps: list[str]     # non-persistable results of LR-schedule ops
    lr_state: list[str]     # persistables LR-schedule ops write (step counters, ...)
    lr_reads: list[str]     # persistables LR-schedule ops only read
    joints: list[Joint] = field(default_factory=list)   # ops reading several pairs

    @property
    def moved(self) -> set[int]:
        """Indices of the ops that leave the trainer."""
        return ({i for g in self.groups for i in g.ops} | set(self.lr_ops)
                | {i for j in self.joints for i in j.ops})

    def joint_of(self, param: str) -> Joint | None:
        """The joint that reads ``param``'s gradient, if any."""
        return next((j for j in self.joints if param in j.params), None)

    def params(self) -> list[str]:
        """Updated parameters, in the order of their first update."""
        return list(dict.fromkeys(g.param for g in self.groups))


def _where(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> str:
    return format_op(op, lambda n: program.find_var(block, n))


def _pairs(op: OpDesc) -> list[tuple[str, str]]:
    rv = list(op.role_var)
    return list(dict.fromkeys(zip(rv[0::2], rv[1::2])))


def method_block(program: ProgramDesc, method: str) -> BlockDesc:
    for b in program.method_blocks():
        if b.name == method:
            return b
    known = ", ".join(b.name for b in program.method_blocks()) or "none"
    raise ProgramDefinitionError(f"transpile: the program has no method {method!r}; its "
                                 f"methods are: {known}")


def analyse_method(program: ProgramDesc, method: str) -> MethodRoles:
    """Group the method's optimize-role ops by parameter and check that each group can run
    on a parameter server given only the gradient."""
    block = method_block(program, method)
    lr_ops = [i for i, op in enumerate(block.ops) if op.role & OpRole.LRSCHED]
    opt_ops = [i for i, op in enumerate(block.ops)
               if op.role & OpRole.OPTIMIZE and not op.role & OpRole.LRSCHED]
    if not opt_ops:
        raise ProgramDefinitionError(
            f"transpile: method {method!r} has no optimizer (none of its ops has the Optimize "
            f"role), so there is nothing for parameter servers to do; call an optimizer's "
            f"minimize(loss) in it, or name the training method with main=...")
    opt_ops, joints = collect_joints(block, opt_ops)
    groups = _group_updates(program, block, method, opt_ops)
    lr_temps, lr_state, lr_reads = _check_lr_ops(program, block, method, lr_ops)
    roles = MethodRoles(method, block.idx, groups, lr_ops, lr_temps, lr_state, lr_reads,
                        joints)
    trainer_writes = {n for i, op in enumerate(block.ops) if i not in roles.moved
                      for n in op.output_names()}
    joint_results = {n for j in joints for n in j.results}
    for grp in groups:
        _classify(program, block, grp, trainer_writes, set(lr_temps) | set(lr_state),
                  joint_results)
        grp.whole = needs_whole(program, block, grp.ops, grp.param, grp.grad)
    _join(program, block, roles)
    _check_state_owners(method, groups)
    return roles


def _join(program: ProgramDesc, block: BlockDesc, roles: MethodRoles) -> None:
    """Check each joint and mark what its groups feed it."""
    by_param = {g.param: g for g in roles.groups}
    outputs = {g.param: {n for i in g.ops for n in block.ops[i].output_names()}
               for g in roles.groups}
    for joint in roles.joints:
        missing = [p for p in joint.params if p not in by_param]
        if missing:
            raise ProgramDefinitionError(
                f"transpile: an optimize op of {roles.method!r} reads the gradient of "
                f"{missing[0]!r}, which no update op of the method updates")
        check_joint(program, block, roles.method, joint, outputs)
        for p in joint.params:
            grp = by_param[p]
            grp.joint_feeds = feeding_ops(block, grp.ops, joint)
            grp.whole = True


def _declared(program: ProgramDesc, block: BlockDesc, name: str) -> VarDesc:
    var = program.find_var(block, name)
    if var is None:
        raise ProgramDefinitionError(f"transpile: {name!r} is used in {block.name!r} but "
                                     f"declared nowhere (run fluid.check_program)")
    return var


def _group_updates(program: ProgramDesc, block: BlockDesc, method: str,
                   opt_ops: list[int]) -> list[UpdateGroup]:
    """The update groups of the optimize ops, in the order of their first op."""
    groups: dict[tuple[str, str], UpdateGroup] = {}
    loose: list[int] = []
    for i in opt_ops:
        op = block.ops[i]
        pairs = _pairs(op)
        if not pairs:
            loose.append(i)
            continue
        key = pairs[0]
        groups.setdefault(key, UpdateGroup(method, key[0], key[1])).ops.append(i)
    _place_loose(program, block, method, list(groups.values()), loose)
    return sorted(groups.values(), key=lambda g: g.ops[0])


def _place_loose(program: ProgramDesc, block: BlockDesc, method: str,
                 groups: list[UpdateGroup], loose: list[int]) -> None:
    """Optimize ops without op_role_var join a group they exchange a var with."""
    while loose:
        placed = False
        for i in list(loose):
            op = block.ops[i]
            touched = set(op.input_names()) | set(op.output_names())
            for grp in groups:
                names = {n for j in grp.ops for n in block.ops[j].output_names()}
                names |= {n for j in grp.ops for n in block.ops[j].input_names()
                          if not _declared(program, block, n).persistable or n == grp.param}
                if touched & names:
                    grp.ops.append(i)
                    grp.ops.sort()
                    loose.remove(i)
                    placed = True
                    break
        if not placed:
            raise ProgramDefinitionError(
                f"transpile: cannot tell which parameter this optimize op of {method!r} "
                f"updates: it has no op_role_var and shares no var with an update that has "
                f"one:\n  {_where(program, block, block.ops[loose[0]])}")


def _check_lr_ops(program: ProgramDesc, block: BlockDesc, method: str,
                  lr_ops: list[int]) -> tuple[list[str], list[str], list[str]]:
    temps: list[str] = []
    state: list[str] = []
    reads: list[str] = []
    for i in lr_ops:
        op = block.ops[i]
        for n in op.input_names():
            var = _declared(program, block, n)
            if n in temps or n in state:
                continue
            if var.persistable:
                if n not in reads:
                    reads.append(n)
                continue
            raise ProgramDefinitionError(
                f"transpile: the learning-rate schedule op of {method!r} reads {n!r}, which "
                f"the trainer computes; schedule ops run on the parameter servers and may read "
                f"only persistable state and other schedule results:\n  "
                f"{_where(program, block, op)}")
        for n in op.output_names():
            var = _declared(program, block, n)
            target = state if var.persistable else temps
            if n not in target:
                target.append(n)
    reads = [n for n in reads if n not in state]
    return temps, state, reads


def _classify(program: ProgramDesc, block: BlockDesc, grp: UpdateGroup,
              trainer_writes: set[str], lr_results: set[str], joint_results: set[str]
              ) -> None:
    """Sort what the group reads and writes (see the module docstring)."""
    _check_pair(program, block, grp, trainer_writes)
    written: set[str] = set()
    for i in grp.ops:
        op = block.ops[i]
        for n in op.input_names():
            if n in joint_results:
                if n not in grp.joint_inputs:
                    grp.joint_inputs.append(n)
            elif n not in (grp.param, grp.grad) and n not in written:
                _sort_input(program, block, grp, op, n, trainer_writes, lr_results)
        for n in op.output_names():
            written.add(n)
            if n != grp.param:
                _sort_output(program, block, grp, op, n, trainer_writes)
    grp.shared = [n for n in grp.shared if n not in grp.state]


def _check_pair(program: ProgramDesc, block: BlockDesc, grp: UpdateGroup,
                trainer_writes: set[str]) -> None:
    """The parameter is state of block 0 and the trainer computes a gradient of its shape."""
    pvar = program.global_block().vars.get(grp.param)
    first = block.ops[grp.ops[0]]
    if pvar is None or not pvar.persistable:
        raise ProgramDefinitionError(
            f"transpile: op_role_var of {grp.method!r} names {grp.param!r} as a parameter, but "
            f"it is not a persistable var of block 0:\n  {_where(program, block, first)}")
    gvar = program.find_var(block, grp.grad)
    if gvar is None:
        raise ProgramDefinitionError(
            f"transpile: op_role_var of {grp.method!r} names the gradient {grp.grad!r}, which "
            f"is declared nowhere:\n  {_where(program, block, first)}")
    if tuple(gvar.shape) != tuple(pvar.shape) or gvar.dtype != pvar.dtype:
        raise ProgramDefinitionError(
            f"transpile: gradient {grp.grad!r} {gvar.dtype}{list(gvar.shape)} does not match "
            f"parameter {grp.param!r} {pvar.dtype}{list(pvar.shape)}; only dense gradients "
            f"can be sent in row blocks")
    if grp.grad not in trainer_writes:
        raise ProgramDefinitionError(
            f"transpile: no forward or backward op of {grp.method!r} computes the gradient "
            f"{grp.grad!r} of {grp.param!r}, so the trainer has nothing to send")


def _sort_input(program: ProgramDesc, block: BlockDesc, grp: UpdateGroup, op: OpDesc,
                n: str, trainer_writes: set[str], lr_results: set[str]) -> None:
    """A var the update reads: a schedule's result, a replicated persistable, or a value
    the trainer sends along with the gradient."""
    var = _declared(program, block, n)
    if n in lr_results:
        target = grp.shared if var.persistable else grp.lr_inputs
        if n not in target:
            target.append(n)
    elif var.persistable:
        if n in trainer_writes:
            raise ProgramDefinitionError(
                f"transpile: the update of {grp.param!r} reads {n!r}, which the "
                f"trainer also writes in {grp.method!r}; a parameter server cannot see "
                f"the trainer's value:\n  {_where(program, block, op)}")
        if n not in grp.shared:
            grp.shared.append(n)
    elif var.has_batch_dim:
        raise ProgramDefinitionError(
            f"transpile: the update of {grp.param!r} in {grp.method!r} reads {n!r}, a "
            f"per-sample value of the trainer; an update may read the gradient and "
            f"values without a batch dimension only:\n  {_where(program, block, op)}")
    elif n not in grp.side:
        grp.side.append(n)


def _sort_output(program: ProgramDesc, block: BlockDesc, grp: UpdateGroup, op: OpDesc,
                 n: str, trainer_writes: set[str]) -> None:
    """A var the update writes: the parameter's state (an accumulator) or a temporary."""
    if n == grp.grad:
        raise ProgramDefinitionError(
            f"transpile: an update op of {grp.param!r} overwrites its gradient "
            f"{grp.grad!r}:\n  {_where(program, block, op)}")
    if _declared(program, block, n).persistable:
        if n in trainer_writes:
            raise ProgramDefinitionError(
                f"transpile: {n!r} is written both by the update of {grp.param!r} and "
                f"by the trainer in {grp.method!r}")
        if n not in grp.state:
            grp.state.append(n)
    elif n not in grp.temps:
        grp.temps.append(n)


def _check_state_owners(method: str, groups: list[UpdateGroup]) -> None:
    owner: dict[str, str] = {}
    for grp in groups:
        for n in grp.state:
            other: str | None = owner.setdefault(n, grp.param)
            if other != grp.param:
                raise ProgramDefinitionError(
                    f"transpile: optimizer state {n!r} is updated for both {other!r} and "
                    f"{grp.param!r} in {method!r}; state must belong to one parameter so it "
                    f"can live beside that parameter's blocks")
