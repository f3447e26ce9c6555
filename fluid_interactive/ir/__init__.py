"""The program description (records, text form, JSON, verifier). Imports nothing of ours
but the error types."""
from .names import escape_unprintable, name_problem, printable
from .records import (
                      BATCH,
                      DTYPES,
                      BlockDesc,
                      OpDesc,
                      OpRole,
                      ProgramDesc,
                      SourceLoc,
                      VarDesc,
                      canonical_dtype,
                      dtype_kind,
)
from .serialize import program_from_json, program_to_json
from .text import format_block, format_op, format_program, short_type
from .verify import check_structure, check_text

__all__ = ["BATCH", "DTYPES", "BlockDesc", "OpDesc", "OpRole", "ProgramDesc", "SourceLoc",
           "VarDesc", "canonical_dtype", "dtype_kind", "program_from_json", "program_to_json",
           "format_block", "format_op", "format_program", "short_type", "check_structure",
           "check_text",
           "name_problem", "printable", "escape_unprintable"]
