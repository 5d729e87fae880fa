"""The nbgrader facts about cells that every stage reads: ids, test cells, answer cells, hidden regions."""
import re
from collections.abc import Collection, Mapping
from typing import Any

from nbformat import NotebookNode

SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
MARKERS = SOLUTION_MARKERS + HIDDEN_MARKERS
# A solution or hidden-test region of a source cell: group 1 its kind, group 2 its body.
REGION = re.compile(r"(BEGIN SOLUTION|BEGIN HIDDEN TESTS)(.*?)(END SOLUTION|END HIDDEN TESTS)", re.S)
# The whole hidden part of a test cell, marker lines included (what the student version lacks).
HIDDEN_PART = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)
TA_ONLY = "course-ta-only"  # tag of cells the grader adds for the TA (review banner): never in feedback
HOLD_BANNER = "course-hold-banner"  # tag of the review banner: formgrader shows it as the decision stands
# code-cell metadata set by the grader (run/ta_view.py) on each code cell that is not a test: "student" where the
# cell shows the student's own run as submitted, "grader" where it shows the grader's run (never in feedback)
SHOWN_RUN = "course_shown_run"
SOLUTION_MARKER_LINE = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|$)", re.M)


def meta(cell: Mapping[str, Any]) -> dict[str, Any]:
    value = cell.get("metadata", {}).get("nbgrader", {})
    return value if isinstance(value, dict) else {}


def grade_id(cell: Mapping[str, Any]) -> str | None:
    value: str | None = meta(cell).get("grade_id")
    return value


def is_test_cell(cell: Mapping[str, Any]) -> bool:
    """An autograded test cell: code, graded, not an answer."""
    m = meta(cell)
    return cell.get("cell_type") == "code" and bool(m.get("grade")) and not m.get("solution")


def is_answer_cell(cell: Mapping[str, Any]) -> bool:
    return bool(meta(cell).get("solution"))


def is_test_grade(grade: Any, solution_names: Collection[str]) -> bool:
    """The same for a gradebook Grade: `solution_names` are its notebook's answer cells."""
    return grade.cell.cell_type == "code" and grade.cell.name not in solution_names


def cells_by_id(nb: NotebookNode) -> dict[str, NotebookNode]:
    return {gid: c for c in nb.cells if (gid := grade_id(c))}


def test_cell_ids(nb: NotebookNode) -> list[str]:
    """grade_ids of the autograded test cells, in notebook order."""
    return [gid for c in nb.cells if is_test_cell(c) and (gid := grade_id(c))]


def has_hidden_tests(cell: Mapping[str, Any]) -> bool:
    return is_test_cell(cell) and HIDDEN_MARKERS[0] in cell.get("source", "")
