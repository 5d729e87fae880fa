"""The course's outcome in every formgrader list: each row that nbgrader's API gives a page (a student, a
submission, a submitted notebook, an assignment) gets a `course` entry read from the records
(`records.class_outcomes`), and the students the records know but nbgrader lists nowhere (missing, not collected,
failed before the gradebook saw them) get a row of their own. The page's script (static/course.js) shows the
status in Chinese (Status.label), marks held and failed rows and shows no number that is not a grade: a held
row's score reads as the report reads it (`held_text`), not as the 0 nbgrader keeps for the held points.

nbgrader's `NbGraderAPI` methods are wrapped in place (`wrap_api`); tests/test_internals.py fingerprints them.
"""
import functools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps.api import NbGraderAPI

from ... import records
from ...course import Folders, nbgrader_config, submissions
from ...model import Outcome, Status
from ...release.student_version import record as released
from ..report import held_text

Row = dict[str, Any]
# the order in which a list sorts statuses: what needs a person first
ORDER = [Status.FAILED, Status.NOT_COLLECTED, Status.MISSING, Status.HELD, Status.COLLECTED, Status.REJECTED,
         Status.REVIEWED, Status.ACCEPTED, Status.GRADED]


def class_outcomes(api: Any, assignments: list[str] | None = None) -> list[Outcome]:
    """Every student's Outcome for `assignments` (None: every assignment of the gradebook) in the course of
    formgrader's `api` (an NbGraderAPI), as `course report` and `course export` read them."""
    return outcomes_in(api.coursedir.root, api.coursedir.db_url, assignments)


def outcomes_in(root: str | Path, db_url: str, assignments: list[str] | None = None) -> list[Outcome]:
    where = Folders(nbgrader_config(root))
    with Gradebook(db_url) as gb:
        names = [a.name for a in gb.assignments] if assignments is None else assignments
        submitted = submissions(where.submitted(), names) if where.submitted().is_dir() else []
        return records.class_outcomes(gb, root, names, submitted)


def shown(o: Outcome, row: Row | None = None) -> Row:
    """What a list shows of one outcome; `row`: nbgrader's row of one of its notebooks, whose score cells then
    read as the notebook's."""
    if o.review:
        detail = o.review.describe() + (f"：{o.review.note}" if o.review.note else "")
    elif o.status == Status.HELD:
        detail = f"{o.withheld:g} 分待复核：" + "；".join(o.flags)
    else:
        detail = o.reason
    return {"assignment": o.assignment, "status": str(o.status), "label": o.status.label, "rank": ORDER.index(o.status),
            "scored": o.status.has_score, "score": o.score, "max_score": o.max_score, "name": o.name, "detail": detail,
            "held_score": _held_score(o, row)}


def _held_score(o: Outcome, row: Row | None) -> str:
    """What the score column of a held row reads, in place of the points nbgrader counts meanwhile (the held ones
    as 0): the words of the report. A notebook of an assignment with other scored notebooks reads 待复核."""
    if o.status != Status.HELD:
        return ""
    return held_text(o) if row is None or row.get("max_score") == o.max_score else Status.HELD.label


def counts(outcomes: list[Outcome]) -> list[Row]:
    """How many students have each status, in ORDER."""
    found = Counter(o.status for o in outcomes)
    return [{"status": str(s), "label": s.label, "n": found[s]} for s in ORDER if found[s]]


def _by_student(outcomes: list[Outcome]) -> dict[str, dict[str, Outcome]]:
    found: dict[str, dict[str, Outcome]] = {}
    for o in outcomes:
        found.setdefault(o.student, {})[o.assignment] = o
    return found


def _blank(student: str, o: Outcome) -> Row:
    """A row for a student nbgrader does not list, in the shape of its own rows for a student without a submission."""
    return {"id": None, "student": student, "name": o.assignment, "last_name": None, "first_name": None, "email": None,
            "lms_user_id": None, "timestamp": None, "display_timestamp": None, "score": 0.0, "max_score": 0.0,
            "needs_manual_grade": False, "failed_tests": False, "flagged": False, "autograded": False,
            "submitted": False, "index": None}


def students(api: Any, found: list[Row]) -> list[Row]:
    """Manage Students: per student, the outcome of each assignment collected so far; the total only where each is
    a grade."""
    outcomes = _by_student(class_outcomes(api))
    listed = {row["id"] for row in found}
    for student in sorted(set(outcomes) - listed):
        found.append({**_blank(student, next(iter(outcomes[student].values()))), "id": student})
    for row in found:
        mine = sorted(outcomes.get(row["id"], {}).values(), key=lambda o: o.assignment)
        grades = bool(mine) and all(o.status.is_grade for o in mine)
        row["course"] = {"name": next((o.name for o in mine if o.name), ""), "outcomes": [shown(o) for o in mine],
                         "rank": min((ORDER.index(o.status) for o in mine), default=len(ORDER)),
                         "score": sum(o.score or 0.0 for o in mine) if grades else None,
                         "max_score": sum(o.max_score or 0.0 for o in mine) if grades else None,
                         # as `course export`'s 总分: points wait for review, nothing else is missing
                         "held": bool(mine) and not grades and all(o.status.has_score for o in mine)}
    return found


def submissions_of(api: Any, assignment: str, found: list[Row]) -> list[Row]:
    """Manage Submissions and Manual Grading's submissions of `assignment`: a row per student, with its outcome."""
    outcomes = {o.student: o for o in class_outcomes(api, [assignment])}
    listed = {row["student"] for row in found}
    found += [_blank(s, o) for s, o in sorted(outcomes.items()) if s not in listed]
    for row in found:
        o = outcomes.get(row["student"])
        row["course"] = shown(o) if o else None
    return found


def listed_submissions(api: Any, assignment: str, found: list[Row]) -> list[Row]:
    """Manual Grading's submitted notebooks: only those nbgrader lists (they have an autograded notebook to open)."""
    outcomes = {o.student: o for o in class_outcomes(api, [assignment])}
    for row in found:
        o = outcomes.get(row["student"])
        row["course"] = shown(o, row) if o else None
    return found


def student_assignments(api: Any, student: str, found: list[Row]) -> list[Row]:
    """A student's assignments: the outcome of each (None where nothing of it is collected yet)."""
    mine = _by_student(class_outcomes(api)).get(student, {})
    for row in found:
        o = mine.get(row["name"])
        row["course"] = shown(o) if o else None
    return found


def student_notebooks(api: Any, student: str, assignment: str, found: list[Row]) -> list[Row]:
    """A student's notebooks of one assignment, each with the submission's outcome; a submission the gradebook
    has no notebooks of (failed, missing, not collected) lists the assignment's notebooks with that outcome."""
    mine = [o for o in class_outcomes(api, [assignment]) if o.student == student]
    if not mine:
        return found
    o = mine[0]
    if not found:
        with Gradebook(api.coursedir.db_url) as gb:
            try:
                notebooks = [nb.name for nb in gb.find_assignment(assignment).notebooks]
            except MissingEntry:
                notebooks = []
        found = [{**_blank(student, o), "name": name} for name in sorted(notebooks)]
    for row in found:
        row["course"] = shown(o, row)
    return found


def per_assignment(api: Any, found: list[Row], key: Callable[[Row], str]) -> list[Row]:
    """Manual Grading's assignments and notebooks: how many students have each status."""
    outcomes = class_outcomes(api)
    for row in found:
        row["course"] = {"counts": counts([o for o in outcomes if o.assignment == key(row)])}
    return found


def assignments(root: str | Path, db_url: str) -> list[Row]:
    """What Manage Assignments lists: each released assignment, when `course release` released it, how many
    submissions the gradebook holds for it and how many students have each status."""
    found = []
    with Gradebook(db_url) as gb:
        graded = {a.name: len(a.submissions) for a in gb.assignments}
    outcomes = outcomes_in(root, db_url, [name for name in released(root) if name in graded])
    for name, entry in sorted(released(root).items()):
        found.append({"name": name, "released": entry.get("released", "").replace("T", " ")[:16],
                      "notebooks": sorted(entry.get("release", {})), "submissions": graded.get(name, 0),
                      "counts": counts([o for o in outcomes if o.assignment == name])})
    return found


def _wrapped(method: Callable[..., list[Row]], add: Callable[..., list[Row]]) -> Callable[..., list[Row]]:
    @functools.wraps(method)
    def wrapped(self: Any, *args: str) -> list[Row]:
        return add(self, *args, method(self, *args))
    return wrapped


def wrap_api() -> None:
    """Every list formgrader's pages fetch carries the course's outcomes."""
    NbGraderAPI.get_students = _wrapped(NbGraderAPI.get_students, students)
    NbGraderAPI.get_submissions = _wrapped(NbGraderAPI.get_submissions, submissions_of)
    NbGraderAPI.get_notebook_submissions = _wrapped(
        NbGraderAPI.get_notebook_submissions, lambda api, a, nb, found: listed_submissions(api, a, found))
    NbGraderAPI.get_student_submissions = _wrapped(NbGraderAPI.get_student_submissions, student_assignments)
    NbGraderAPI.get_student_notebook_submissions = _wrapped(NbGraderAPI.get_student_notebook_submissions,
                                                            student_notebooks)
    NbGraderAPI.get_assignments = _wrapped(NbGraderAPI.get_assignments,
                                           lambda api, found: per_assignment(api, found, lambda row: row["name"]))
    NbGraderAPI.get_notebooks = _wrapped(NbGraderAPI.get_notebooks,
                                         lambda api, a, found: per_assignment(api, found, lambda row: a))
