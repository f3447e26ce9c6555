"""``./dev`` says what it is doing while it sets a fresh clone up (run here against a stub
Python that records what it was asked, so nothing is installed)."""
import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STUB = """#!/bin/sh
# a stand-in for python3: `-m venv DIR` makes DIR/bin/python (this stub); anything else is
# recorded and succeeds
echo "$@" >> "$(dirname "$0")/calls.log"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
fi
"""


def test_a_fresh_set_up_says_each_step(tmp_path):
    shutil.copy(os.path.join(ROOT, "dev"), tmp_path / "dev")
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    stub = tmp_path / "stub" / "python3"
    stub.parent.mkdir()
    stub.write_text(STUB)
    stub.chmod(0o755)
    env = dict(os.environ, PYTHON=str(stub))
    first = subprocess.run(["bash", str(tmp_path / "dev"), "test", "-k", "nothing"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert first.returncode == 0, first.stderr
    said = [line for line in first.stderr.splitlines() if line.startswith("dev: ")]
    assert said[0] == "dev: creating the virtual environment .venv"
    extras = re.search(r'setup "(test[^"]*)"\n    say "running the tests',
                       (tmp_path / "dev").read_text()).group(1)
    assert any(s.startswith(f"dev: installing fluid_interactive[{extras}]") for s in said)
    assert said[-2:] == ["dev: set-up done", "dev: running the tests: .venv/bin/python -m "
                                             "pytest -q -k nothing"]
    calls = (tmp_path / ".venv" / "bin" / "calls.log").read_text()
    assert f"-m pip install -q -e .[{extras}]" in calls
    # the second run skips the set-up, and says only what it runs
    again = subprocess.run(["bash", str(tmp_path / "dev"), "test"], capture_output=True,
                           text=True, env=env, timeout=60)
    assert [s for s in again.stderr.splitlines() if s.startswith("dev: ")] == [
        "dev: running the tests: .venv/bin/python -m pytest -q "]
