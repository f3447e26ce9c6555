"""The generated reference pages match the code."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_api_and_error_pages_are_current():
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_docs.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_starts_with_the_two_setup_commands():
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = [l for l in f.read().splitlines() if l.startswith("./dev ")]
    assert lines[:2] and lines[0].startswith("./dev demo") and lines[1].startswith("./dev test")
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert "./dev test" in f.read()
