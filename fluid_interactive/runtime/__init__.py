"""Scope, planning, code generation and the compiled program object."""
from .live.compiled import RESERVED_NAMES, CompiledMethod, CompiledProgram

__all__ = ["RESERVED_NAMES", "CompiledMethod", "CompiledProgram"]
