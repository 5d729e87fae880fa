"""A unit's catalog (`catalog/<assignment>.py`) and the source notebook with a catalogued answer in place: read by
the authoring tools and by the grader's diagnosis, whose catalogs read the code their deck teaches with `deck_code.deck_definitions`.

A catalog defines:
- `NOTEBOOK`: the notebook name in `source/<assignment>/` (without `.ipynb`);
- `LECTURER`: {solution grade_id: code} — the lecturer's own d2l-style code, which must earn full marks;
- `ALSO_CORRECT` (optional): {name: {solution grade_id: code}} — more answers that must earn full marks:
  the code the deck teaches, a differently styled correct solution;
- `VARIANTS`: a list of dicts, each with `id`, `mistake` (what the student got wrong), `caught_by`
  (the exact set of test-cell grade_ids that must lose points), and the change itself:
  `edits` {grade_id: [(old, new), ...]} applied to the source solution (each `old` must occur once),
  and/or `cells` {grade_id: code} replacing a solution cell outright. `needs_cuda: True` marks a bug
  that only shows on a GPU;
- `DECK`, `MISCONCEPTIONS` (optional): {variant id: (label, hint, slide title of DECK[, another deck])} for the
  variants that show a misunderstanding; the grader names one in the feedback when a failed test's outputs
  are its own (run/diagnosis.py). The hint describes the symptom and an experiment the student can run, points to
  the slide and never quotes the answer;
- `FIXES`: {misconception id: the token that tells its fix apart (`repeat_interleave`, `dim=-1`)}: its hint must
  not contain it;
- `TWINS`: {misconception id: {solution grade_id: code}}, each misconception written another way, as a
  student would: it must lose the same points and be named.
"""
import copy
import importlib.util
import os
from pathlib import Path
from types import ModuleType

import nbformat
from nbformat import NotebookNode

from .cells import cells_by_id
from .course import catalog_path, folders


def load_catalog(root: str | os.PathLike[str], assignment: str) -> ModuleType:
    path = catalog_path(root, assignment)
    spec = importlib.util.spec_from_file_location(f"catalog_{assignment}", path)
    assert spec is not None and spec.loader is not None  # a path ending in .py always has a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_notebook(root: str | Path, assignment: str, catalog: ModuleType) -> NotebookNode:
    nb: NotebookNode = nbformat.read(folders(root).source(assignment) / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    return nb


def with_code(nb: NotebookNode, cells: dict[str, str] | None = None,
              edits: dict[str, list[tuple[str, str]]] | None = None) -> NotebookNode:
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
