"""Running transpiled programs (DESIGN §2 `distributed`; docs/distributed.md).

``plan = transpile(compiled, trainers=2, pservers=2)`` (a pure pass, in
`fluid_interactive.passes.transpiler`), then ``dist = launch(plan)``: the in-process engine,
with parameter servers as objects and one thread per trainer, or ``launch(plan,
engine='ray')``: servers and trainers as Ray actors. A script run with ``--distributed``
(see `roles`) gets the same object from ``Compile()``; ``fluid run`` (`cli`) starts a job.
The pieces an engine provides are in `interface`.
"""
from ..passes.transpiler import TranspilePlan, transpile
from .errors import DistributedError, DistributedTimeout, ServerUnreachable, StepAborted, StepFailed
from .interface import CallResult, Communicator, Engine, Pending, PServer, Trainer
from .launch import RoleConfig, engine_named, launch, parse_distributed_arg, role_from_env
from .local import LocalEngine, LocalTrainer
from .program import DistributedMethod, DistributedProgram
from .pserver import ParameterServer, PServerSpec, pserver_spec
from .ray_engine import RayEngine
from .ray_engine import shutdown as stop_ray

__all__ = ["transpile", "TranspilePlan", "launch", "engine_named", "DistributedProgram",
           "DistributedMethod", "PServer", "Pending", "Communicator", "Engine", "Trainer",
           "CallResult", "ParameterServer", "PServerSpec", "pserver_spec", "LocalEngine",
           "LocalTrainer", "RoleConfig", "role_from_env", "parse_distributed_arg",
           "DistributedError", "DistributedTimeout", "ServerUnreachable", "StepAborted",
           "StepFailed", "RayEngine", "stop_ray"]
