"""No function of the package or the extension is longer than 60 lines (docstring
included): a reviewer reads each one on one screen."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 60


def _functions():
    for top in ("fluid_interactive", os.path.join("extension", "fluid")):
        for folder, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                with open(path) as f:
                    tree = ast.parse(f.read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield os.path.relpath(path, ROOT), node


def test_no_function_is_longer_than_a_screen():
    long = [f"{path}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
            for path, node in _functions() if node.end_lineno - node.lineno + 1 > LIMIT]
    assert not long, "split these functions:\n" + "\n".join(long)
