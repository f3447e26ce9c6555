"""Style and types, as configured in pyproject.toml, over the files git tracks (a user's
own untracked scripts in the clone are theirs, not the project's): `ruff check .` and a bare
`mypy` in the repository root check the same, plus any untracked files."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
#: what mypy checks (pyproject.toml's [tool.mypy] files)
TYPED = ("fluid_interactive/", "extension/fluid/")


def _tool(name: str) -> str:
    path = os.path.join(BIN, name)
    if os.path.exists(path):
        return path
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: the test extra installs it "
                    f"(pip install -e '.[test]')")
    return found


def tracked_python_files() -> list[str]:
    """The .py files git tracks, relative to the root; all of them outside a git clone."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--", "*.py"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
    except OSError:
        listed = None
    if listed is None or listed.returncode != 0:
        return ["."]
    return [f for f in listed.stdout.splitlines() if os.path.exists(os.path.join(ROOT, f))]


def test_ruff_finds_nothing():
    result = subprocess.run([_tool("ruff"), "check", "--no-cache", *tracked_python_files()],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    files = tracked_python_files()
    typed = list(TYPED) if files == ["."] else [f for f in files if f.startswith(TYPED)]
    result = subprocess.run([_tool("mypy"), *typed], cwd=ROOT, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr


def test_an_untracked_file_with_lint_errors_is_not_the_projects(tmp_path):
    stray = os.path.join(ROOT, "fluid_interactive", "_untracked_scratch_for_lint_test.py")
    with open(stray, "w") as f:
        f.write("import os,sys\nx: int = 'not an int'\n")
    try:
        assert stray not in [os.path.join(ROOT, f) for f in tracked_python_files()]
        test_ruff_finds_nothing()
    finally:
        os.remove(stray)
