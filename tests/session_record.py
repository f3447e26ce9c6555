"""What a test named to run last (``test_zz_*``) reads of the session before it: whether
the whole folder of tests that fill a record ran, and the record itself, kept in a module
that may be imported under two names (``ops.device`` and ``tests.ops.device``)."""
from __future__ import annotations

import os
import sys

import pytest


def require_whole_folder(request, folder: str) -> None:
    """Skip unless every ``test_*.py`` of ``folder`` is in this session."""
    ran = {os.path.basename(str(item.path)) for item in request.session.items}
    suites = {f for f in os.listdir(folder) if f.startswith("test_") and f.endswith(".py")}
    if not suites <= ran:
        pytest.skip(f"runs with the whole {os.path.basename(folder)} folder (its tests fill "
                    f"the record)")


def recorded(module_suffix: str, attr: str) -> set:
    """The union of the set ``attr`` over the loaded modules named ``...module_suffix``."""
    return set().union(*(getattr(m, attr) for name, m in list(sys.modules.items())
                         if name.endswith(module_suffix) and hasattr(m, attr)))
