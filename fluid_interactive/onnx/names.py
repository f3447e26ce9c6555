"""Names read from an ONNX file are untrusted: each one is checked before it becomes a var
name of a program, and error messages show names only through ``repr``."""
from __future__ import annotations

from ..errors import OnnxError

#: Longer names are almost certainly not meant as names (or are an attack on a printer).
MAX_NAME_LENGTH = 256


def checked_name(name: object, what: str, path: str) -> str:
    """``name`` when it may name a var: a non-empty printable string without ``@`` (which
    marks our gradient vars) and at most `MAX_NAME_LENGTH` characters."""
    if not isinstance(name, str) or not name:
        problem = "is empty"
    elif len(name) > MAX_NAME_LENGTH:
        problem = f"is {len(name)} characters long (at most {MAX_NAME_LENGTH})"
    elif not name.isprintable():
        problem = "contains control or other non-printable characters"
    elif "@" in name:
        problem = "contains '@', which marks gradient vars"
    else:
        return name
    shown = repr(name if not isinstance(name, str) else name[:80])
    raise OnnxError(f"{path}: {what} {shown} {problem}; such a name cannot become a var "
                    f"name. Rename it in the file (e.g. with onnx.compose or by editing the "
                    f"graph) and import again")
