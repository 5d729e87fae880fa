"""The submitted notebook's cells matched to the released ones: nbgrader's metadata put back (or found again when
it is gone), the answers in released order, and the test cells where the release has them, so that they run in
released order.

A student version's test cells run after the answers they test and before the next answers. A submission that
moves a test cell after a later answer, deletes it (it is put back in its place) or turns it into an answer cell
cannot change what runs before a test.
"""
import copy
import difflib
from typing import Any

from nbformat import NotebookNode

from ..cells import cells_by_id, grade_id, is_answer_cell, is_test_cell


def restore_metadata(nb: NotebookNode, released: NotebookNode) -> int:
    """Put back the nbgrader metadata of the student version: a test cell turned into an answer cell, a
    pasted copy of a cell, or a cell claiming an id the assignment does not have, cannot change what is
    graded. Returns how many cells changed."""
    known = {gid: cell.metadata["nbgrader"] for gid, cell in cells_by_id(released).items()}
    changed, seen = 0, set[Any]()
    for cell in reversed(nb.cells):  # a pasted copy keeps no id: the last cell with an id keeps it, as in nbgrader
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if gid in seen:
            del cell.metadata["nbgrader"]
            continue
        seen.add(gid)
        if gid in known:
            if meta != known[gid]:
                cell.metadata["nbgrader"] = copy.deepcopy(known[gid])
                changed += 1
        else:
            del cell.metadata["nbgrader"]
            changed += 1
    return changed


def _key(cell: NotebookNode) -> tuple[str, str]:
    source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
    return (cell.cell_type, source.strip())


def match_cells(nb: NotebookNode, released: NotebookNode) -> tuple[int, list[str]]:
    """Give a notebook without nbgrader metadata (cells pasted into a new notebook) the metadata of the release,
    matched by content: cells the student did not change (instructions, locked cells, test cells) anchor the
    match, and the answer cells are the student's cells of the same type between the same anchors.
    Returns (cells matched, grade_ids of answer cells that could not be found)."""
    ours, theirs = nb.cells, released.cells
    matcher = difflib.SequenceMatcher(a=[_key(c) for c in ours], b=[_key(c) for c in theirs], autojunk=False)
    placed: dict[int, int] = {}  # index in theirs -> index in ours
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            placed[block.b + k] = block.a + k
    missing: list[str] = []
    for j, cell in enumerate(theirs):
        gid = grade_id(cell)
        if not gid or j in placed:
            continue
        before = max([placed[i] for i in placed if i < j], default=-1)
        after = min([placed[i] for i in placed if i > j], default=len(ours))
        free = [i for i in range(before + 1, after) if i not in placed.values()
                and ours[i].cell_type == cell.cell_type and not ours[i].metadata.get("nbgrader")]
        if free and is_answer_cell(cell):
            placed[j] = free[0]
        elif not is_test_cell(cell):
            missing.append(gid)
    count = 0
    for j, i in placed.items():
        if grade_id(theirs[j]):
            ours[i].metadata["nbgrader"] = copy.deepcopy(theirs[j].metadata["nbgrader"])
            count += 1
    return count, [m for m in missing if is_answer_cell(cells_by_id(released)[m])]


def put_answers_in_order(nb: NotebookNode, released: NotebookNode) -> bool:
    """A student who dragged a part of the notebook above another is graded as if it were in released order: each
    cell the release marks (answers, the locked cells such as the imports) moves together with the cells the
    student put just before it (the instructions, their own helper cells), and the test cells are left to
    `put_tests_in_order`, which puts them back after their answers. Returns whether anything moved (nothing
    does when the marked cells are in released order)."""
    order = {gid: k for k, gid in enumerate(grade_id(c) for c in released.cells if grade_id(c) and not is_test_cell(c))}
    found = [order[gid] for gid in map(grade_id, nb.cells) if gid in order]
    if found == sorted(found):
        return False
    segments: list[tuple[int, list[NotebookNode]]] = []
    current: list[NotebookNode] = []
    for cell in nb.cells:
        if is_test_cell(cell):
            continue
        current.append(cell)
        if grade_id(cell) in order:
            segments.append((order[grade_id(cell)], current))
            current = []
    nb.cells = [cell for _, segment in sorted(segments, key=lambda s: s[0]) for cell in segment] + current
    return True


def put_tests_in_order(nb: NotebookNode, released: NotebookNode) -> int:
    """Place every test cell of the release after the cells the release puts before it and before those it puts
    after it (a deleted one is put back, as late as that allows); returns how many were moved or put back."""
    order: dict[str | None, int] = {gid: k for k, gid in enumerate(gid for gid in map(grade_id, released.cells) if gid)}
    changed = 0
    for test in (c for c in released.cells if is_test_cell(c)):
        gid = grade_id(test)
        index = next((k for k, c in enumerate(nb.cells) if grade_id(c) == gid), None)
        cell = nb.cells.pop(index) if index is not None else copy.deepcopy(test)
        positions = [(k, order[grade_id(c)]) for k, c in enumerate(nb.cells) if grade_id(c) in order]
        earliest = max((k + 1 for k, o in positions if o < order[gid]), default=0)
        latest = min((k for k, o in positions if o > order[gid]), default=len(nb.cells))
        target = latest if index is None else min(max(index, earliest), latest)
        nb.cells.insert(target, cell)
        changed += index is None or target != index
    return changed
