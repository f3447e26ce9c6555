"""The executor (`runtime.plan`) and the live compiled program (`runtime.live`)."""
from .live.compiled import CompiledProgram, reserved_names
from .live.method import CompiledMethod
from .live.origin import Origin, Traced, live_programs

__all__ = ["CompiledMethod", "CompiledProgram", "Origin", "Traced", "live_programs",
           "reserved_names"]
