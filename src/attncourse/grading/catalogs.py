"""A unit's catalog (`catalog/<assignment>.py`, described in authoring/variants.py) and the source notebook
with a catalogued answer in place: read by the authoring tools and by the grader's diagnosis."""
import copy
import importlib.util
from pathlib import Path
from types import ModuleType

import nbformat
from nbformat import NotebookNode

from .cells import cells_by_id


def load_catalog(root, assignment) -> ModuleType:
    path = Path(root) / "catalog" / f"{assignment}.py"
    spec = importlib.util.spec_from_file_location(f"catalog_{assignment}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_notebook(root, assignment, catalog) -> NotebookNode:
    return nbformat.read(Path(root) / "source" / assignment / f"{catalog.NOTEBOOK}.ipynb", as_version=4)


def with_code(nb, cells=None, edits=None) -> NotebookNode:
    """A copy of `nb` with solution cells replaced (`cells`) or edited (`edits`)."""
    nb = copy.deepcopy(nb)
    by_id = cells_by_id(nb)
    for grade_id, code in (cells or {}).items():
        by_id[grade_id].source = code
    for grade_id, pairs in (edits or {}).items():
        cell = by_id[grade_id]
        for old, new in pairs:
            count = cell.source.count(old)
            if count != 1:
                raise ValueError(f"edit {old!r} occurs {count} times in cell {grade_id!r}, expected once")
            cell.source = cell.source.replace(old, new)
    return nb
