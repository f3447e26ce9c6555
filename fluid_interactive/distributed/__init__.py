"""Running transpiled programs (DESIGN §2 `distributed`; docs/distributed.md).

``plan = transpile(compiled, trainers=2, pservers=2)`` (a pure pass, in
`fluid_interactive.passes.transpiler`), then ``dist = launch(plan)``: the in-process engine,
with parameter servers as objects and one thread per trainer, or ``launch(plan,
engine='ray')``: servers and trainers as Ray actors. A script run with ``--distributed``
(see `roles`) gets the same object from ``Compile()``; ``fluid run`` (`cli`) starts a job.
The pieces an engine provides are in `interface` and `engine`.
"""
from ..passes.transpiler import TranspilePlan, transpile
from .agreement import Fingerprint, fingerprint
from .engine import Engine, Job
from .errors import (
    DistributedError,
    DistributedTimeout,
    PlanMismatch,
    ServerUnreachable,
    StepAborted,
    StepFailed,
)
from .interface import CallResult, Communicator, Pending, PServer, Trainer
from .launch import engine_named, launch
from .local import LocalEngine, LocalTrainer
from .program import DistributedMethod, DistributedProgram
from .pserver import ParameterServer
from .ray_engine import RayEngine
from .ray_engine import shutdown as stop_ray
from .server_spec import PServerSpec, ServerStatus, pserver_spec
from .settings import RoleConfig, parse_distributed_arg, role_from_env

__all__ = ["transpile", "TranspilePlan", "launch", "engine_named", "DistributedProgram",
           "DistributedMethod", "PServer", "Pending", "Communicator", "Engine", "Job",
           "Trainer", "CallResult", "ParameterServer", "PServerSpec", "ServerStatus",
           "pserver_spec", "Fingerprint", "fingerprint", "LocalEngine", "LocalTrainer",
           "RoleConfig", "role_from_env", "parse_distributed_arg", "DistributedError",
           "DistributedTimeout", "PlanMismatch", "ServerUnreachable", "StepAborted",
           "StepFailed", "RayEngine", "stop_ray"]
