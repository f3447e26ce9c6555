"""`fluid`: the notebook face of fluid_interactive.

``import fluid`` gives the whole public API; ``%load_ext fluid`` in IPython or Jupyter also
puts ``fluid`` into the user's namespace.
"""
import os as _os

from fluid_interactive import *  # noqa: F401,F403
from fluid_interactive import __all__ as _engine_all
from fluid_interactive.ir.source import exclude_path as _exclude_path

# Frames in this package are never reported as the user's line.
_exclude_path(_os.path.dirname(_os.path.abspath(__file__)))


def load_ipython_extension(ipython) -> None:
    """``%load_ext fluid``: make ``fluid`` available in the user namespace."""
    import sys
    ipython.push({"fluid": sys.modules[__name__]})


def unload_ipython_extension(ipython) -> None:
    """``%unload_ext fluid``: nothing global to undo yet beyond the namespace entry."""
    ipython.user_ns.pop("fluid", None)


__all__ = list(_engine_all) + ["load_ipython_extension", "unload_ipython_extension"]
