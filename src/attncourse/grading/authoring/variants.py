"""Submissions made from the source notebook: the reference, the lecturer's and the deck's code, catalogued
mistakes and their twins; and the shape check of a catalog (`catalog_problems`), read without a kernel. The
catalog format is described in `attncourse.grading.catalogs`."""
import copy
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
from nbformat import NotebookNode

from ..catalogs import load_catalog, source_notebook, with_code
from ..cells import SOLUTION_MARKER_LINE, cells_by_id, has_hidden_tests, is_answer_cell, test_cell_ids
from ..course import folders


def answered(release_nb: NotebookNode, source_nb: NotebookNode, replace_cells: dict[str, str] | None = None,
             edits: dict[str, list[tuple[str, str]]] | None = None) -> NotebookNode:
    """The student version with every solution cell filled in from `source_nb` (then changed)."""
    nb: NotebookNode = copy.deepcopy(release_nb)
    answers = cells_by_id(with_code(source_nb, replace_cells, edits))
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if is_answer_cell(cell) and gid in answers:
            cell.source = SOLUTION_MARKER_LINE.sub("", answers[gid].source)
    return nb


def catalog_cases(root: str | Path, assignment: str) -> dict[str, tuple[NotebookNode, set[str]]]:
    """{case: (submission notebook, test cells that must lose points)}: the reference answer, the lecturer's
    code, the other correct answers (`correct_<name>`), every variant that shows on this machine (`needs_cuda`
    ones only where CUDA is used) and, for a misconception, its twin (`twin_<id>`: the same mistake written
    another way)."""
    catalog = load_catalog(root, assignment)
    src = source_notebook(root, assignment, catalog)
    rel = nbformat.read(folders(root).release(assignment) / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    cases: dict[str, tuple[NotebookNode, set[str]]] = {
        "reference": (answered(rel, src), set()), "lecturer": (answered(rel, src, catalog.LECTURER), set())}
    for name, cells in getattr(catalog, "ALSO_CORRECT", {}).items():
        cases[f"correct_{name}"] = (answered(rel, src, cells), set())
    for v in catalog.VARIANTS:
        if not v.get("needs_cuda") or uses_cuda():
            cases[f"bug_{v['id']}"] = (answered(rel, src, v.get("cells"), v.get("edits")), set(v["caught_by"]))
            if v["id"] in getattr(catalog, "TWINS", {}):
                cases[f"twin_{v['id']}"] = (answered(rel, src, catalog.TWINS[v["id"]]), set(v["caught_by"]))
    return cases


def deck_only(root: str | Path, assignment: str) -> NotebookNode:
    """The student version with only the answers a deck prints (`ALSO_CORRECT["deck"]`) filled in, the other
    answer cells left as released: what a student who copies the lecture earns."""
    catalog = load_catalog(root, assignment)
    rel = nbformat.read(folders(root).release(assignment) / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    deck = getattr(catalog, "ALSO_CORRECT", {}).get("deck", {})
    nb: NotebookNode = copy.deepcopy(rel)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if is_answer_cell(cell) and gid in deck:
            cell.source = deck[gid]
    return nb


def uses_cuda() -> bool:
    """Whether hidden tests run on CUDA here (the grader's device, see attncourse.checks.cases)."""
    from ...device import get_device
    return bool(get_device().type == "cuda")




MIN_VARIANTS = 8  # a unit's catalog holds at least this many realistic mistakes


def catalog_problems(catalog: ModuleType, source_nb: NotebookNode) -> list[str]:
    """What is wrong with a catalog's shape, read without a kernel: each problem as a sentence ([] if none).

    Ids are unique; `LECTURER`, the deck's code and every variant name real answer cells; `caught_by` names
    real test cells; every edit applies exactly once; every hidden test has a variant that only it catches."""
    cells = cells_by_id(source_nb)
    answers = {gid for gid, c in cells.items() if is_answer_cell(c) and c.cell_type == "code"}
    tests = set(test_cell_ids(source_nb))
    hidden = {gid for gid, c in cells.items() if has_hidden_tests(c)}
    problems: list[str] = []
    lecturer = getattr(catalog, "LECTURER", None)
    if not lecturer:
        problems.append("LECTURER is missing or empty: the lecturer's own code must earn full marks")
    if "deck" not in getattr(catalog, "ALSO_CORRECT", {}):
        problems.append('ALSO_CORRECT["deck"] is missing: read the code the deck teaches with deck_definitions')
    correct = {"LECTURER": lecturer or {}, **{f"ALSO_CORRECT[{k!r}]": v for k, v in
                                              getattr(catalog, "ALSO_CORRECT", {}).items()}}
    for name, code in correct.items():
        problems += [f"{name} replaces {gid!r}, which is not an answer cell" for gid in code if gid not in answers]
    variants = getattr(catalog, "VARIANTS", [])
    if len(variants) < MIN_VARIANTS:
        problems.append(f"only {len(variants)} variants: a catalog holds at least {MIN_VARIANTS} realistic mistakes")
    seen: set[Any] = set()
    for v in variants:
        vid = v.get("id")
        if not vid or vid in seen:
            problems.append(f"variant id {vid!r} is missing or used twice")
        seen.add(vid)
        for key in ("mistake", "caught_by"):
            if key not in v:
                problems.append(f"{vid}: no {key!r}")
        problems += [f"{vid}: caught_by names {c!r}, which is not a test cell" for c in v.get("caught_by", ())
                     if c not in tests]
        changed = set(v.get("cells", {})) | set(v.get("edits", {}))
        if not changed:
            problems.append(f"{vid}: changes nothing (give 'cells' or 'edits')")
        problems += [f"{vid}: changes {gid!r}, which is not an answer cell" for gid in changed if gid not in answers]
        if not changed - answers:
            try:
                with_code(source_nb, v.get("cells"), v.get("edits"))
            except ValueError as exc:
                problems.append(f"{vid}: {exc}")
    alone = {next(iter(v["caught_by"])) for v in variants if len(v.get("caught_by", ())) == 1}
    problems += [f"hidden test {gid!r} has no variant that only it catches" for gid in sorted(hidden - alone)]
    return problems + misconception_problems(catalog, source_nb, seen, answers)


def _slide_titles(deck: str | os.PathLike[str]) -> set[str]:
    return {m.group(1).strip() for c in nbformat.read(deck, as_version=4).cells if c.cell_type == "markdown"
            for m in [re.match(r"#+\s*(.+)", c.source)] if m}


def misconception_problems(catalog: ModuleType, source_nb: NotebookNode, variant_ids: set[Any],
                           answers: set[str]) -> list[str]:
    """`MISCONCEPTIONS` name variants, each with a label, a hint and the title of a slide of `DECK` (or of the deck
    given fourth); a hint quotes no line of the reference answer nor the token of its own fix (`FIXES`: {variant
    id: the token that tells the fix apart, such as `repeat_interleave`}); `TWINS` write each misconception another
    way, in answer cells."""
    found = getattr(catalog, "MISCONCEPTIONS", {})
    if not found:
        return []
    root = Path(getattr(catalog, "__file__", "")).resolve().parents[1]
    if not (root / getattr(catalog, "DECK", "")).is_file():
        return [f"DECK {getattr(catalog, 'DECK', None)!r} is not a deck: misconceptions point to its slides"]
    code = {line.strip() for c in source_nb.cells if is_answer_cell(c) for line in c.source.splitlines()
            if len(line.strip()) > 12 and not line.strip().startswith("#")}
    problems: list[str] = []
    titles: dict[str, set[str]] = {}  # {deck: its slide titles}, each deck read once
    for vid, entry in found.items():
        if vid not in variant_ids:
            problems.append(f"MISCONCEPTIONS[{vid!r}]: no variant has this id")
        if not (isinstance(entry, tuple) and len(entry) in (3, 4) and all(isinstance(x, str) and x for x in entry)):
            problems.append(f"MISCONCEPTIONS[{vid!r}]: give (label, hint, slide title[, deck when not DECK])")
            continue
        label, hint, slide, *deck = entry
        deck = deck[0] if deck else catalog.DECK
        if (root / deck).is_file() and deck not in titles:
            titles[deck] = _slide_titles(root / deck)
        if slide not in titles.get(deck, ()):
            problems.append(f"MISCONCEPTIONS[{vid!r}]: {slide!r} is no slide title of {deck}")
        problems += [f"MISCONCEPTIONS[{vid!r}]: the hint quotes the answer ({line!r})" for line in code
                     if line in hint or line in label]
        fix = getattr(catalog, "FIXES", {}).get(vid)
        if not (isinstance(fix, str) and fix.strip()):
            problems.append(f"FIXES[{vid!r}]: give the token that distinguishes the fix (a hint must not contain it)")
        elif fix.lower() in hint.lower():
            problems.append(f"MISCONCEPTIONS[{vid!r}]: the hint gives the fix ({fix!r}): describe the symptom and an "
                            "experiment the student can run instead")
    twins = getattr(catalog, "TWINS", {})
    problems += [f"TWINS has no answer for misconception {vid!r}" for vid in found if vid not in twins]
    for vid, cells in twins.items():
        if vid not in found:
            problems.append(f"TWINS[{vid!r}]: not a misconception")
        problems += [f"TWINS[{vid!r}] replaces {gid!r}, which is not an answer cell" for gid in cells if gid not in answers]
    return problems
