"""Running transpiled programs (DESIGN §2 `distributed`; docs/distributed.md).

``plan = transpile(compiled, trainers=2, pservers=2)`` (a pure pass, in
`fluid_interactive.passes.transpiler`), then ``dist = plan.launch()``: the in-process engine,
with parameter servers as objects and one thread per trainer. The interface an engine
implements is in `interface` (`PServer`, `Communicator`, `Engine`).
"""
from ..passes.transpiler import TranspilePlan, register_engine, transpile
from .interface import Communicator, Engine, PServer, StepAborted, Trainer
from .launch import RoleConfig, launch, parse_distributed_arg, role_from_env
from .local import LocalEngine, LocalPServer, LocalTrainer, PServerCommunicator
from .program import DistributedMethod, DistributedProgram

register_engine("local", LocalEngine, default=True)

__all__ = ["transpile", "TranspilePlan", "launch", "DistributedProgram", "DistributedMethod",
           "PServer", "Communicator", "Engine", "Trainer", "StepAborted", "LocalEngine",
           "LocalPServer", "LocalTrainer", "PServerCommunicator", "RoleConfig",
           "role_from_env", "parse_distributed_arg", "register_engine"]
