"""Every package folder of the engine is listed in pyproject.toml, so a wheel ships it."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_package_is_listed():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    listed = set(re.findall(r'"(fluid_interactive[\w.]*)"', text))
    found = set()
    for folder, _, files in os.walk(os.path.join(ROOT, "fluid_interactive")):
        if "__init__.py" in files:
            found.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found == listed
