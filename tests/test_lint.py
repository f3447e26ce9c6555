"""Style and types, as configured in pyproject.toml: `ruff check .` and a bare `mypy` in the
repository root check exactly what this test checks."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


def _tool(name: str) -> str:
    path = os.path.join(BIN, name)
    if os.path.exists(path):
        return path
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: the test extra installs it "
                    f"(pip install -e '.[test]')")
    return found


def test_ruff_finds_nothing():
    result = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr
