"""The code a deck teaches, read from its cells: what a unit's catalog (`catalog/<assignment>.py`) imports to
give `ALSO_CORRECT["deck"]`, so that the deck's own code is graded and cannot drift from the deck."""
import ast
import os
from pathlib import Path
from typing import Any

import nbformat

from . import syntax


def deck_definitions(catalog_file: str | os.PathLike[str], deck: str, names: dict[str, str]) -> dict[str, str]:
    """{solution grade_id: source} of the top-level functions and classes named in `names` ({name: grade_id})
    that the code cells of `deck` (relative to the course root of `catalog_file`) define, verbatim; the last
    definition of a name wins. Empty when the course has no decks (a copy made without them)."""
    path = Path(catalog_file).resolve().parents[1] / deck
    if not path.is_file():
        return {}
    found: dict[str, Any] = {}
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        source = cell.source
        try:
            tree = syntax.parse(source)
        except SyntaxError:  # IPython magics
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                found[names[node.name]] = ast.get_source_segment(source, node)
    return found
