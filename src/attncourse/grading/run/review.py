"""A person's decision on a submission held for review (`course review`), in one step, recorded with who and when.

Accepting releases the held points (the autograded scores count); rejecting sets them to 0. Either way the test
cells stop waiting in formgrader, and the record keeps the decision, the flags it was about, who decided and when.
A TA may also enter the held cells' scores one by one in formgrader; `course review` without a decision lists
what is still waiting.
"""
import datetime
import getpass
from dataclasses import dataclass

from nbgrader.api import Gradebook, MissingEntry

from ..cells import is_test_grade
from ..records import read_record, read_scores, write_record


@dataclass
class Waiting:
    assignment: str
    student: str
    points: float  # autograded points held
    flags: list


def waiting(db_url, root, pairs) -> list[Waiting]:
    """The submissions among `pairs` [(assignment, student)] with points held for review."""
    found = []
    for assignment, student in pairs:
        record = read_record(root, assignment, student) or {}
        try:
            scores = read_scores(db_url, assignment, student)
        except MissingEntry:
            continue
        if scores.withheld:
            found.append(Waiting(assignment, student, scores.withheld, record.get("flags", [])))
    return found


def decide(db_url, root, assignment, student, accept: bool, by: str = "", note: str = "") -> float:
    """Accept or reject the held points of one submission; returns how many points were decided."""
    decided = 0.0
    with Gradebook(db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            raise ValueError(f"成绩库中没有 {student} 的 {assignment}") from None
        for nb in submission.notebooks:
            solutions = {c.name for c in nb.notebook.solution_cells}
            for grade in nb.grades:
                if is_test_grade(grade, solutions) and grade.needs_manual_grade and grade.manual_score is None:
                    decided += grade.auto_score or 0.0
                    if not accept:
                        grade.manual_score = 0.0
                    grade.needs_manual_grade = False
        gb.db.commit()
    if not decided and not (read_record(root, assignment, student) or {}).get("flags"):
        raise ValueError(f"{student} 的 {assignment} 没有待复核的分数")
    record = read_record(root, assignment, student) or {}
    record["review"] = {"decision": "accepted" if accept else "rejected", "points": decided, "flags":
                        record.get("flags", []), "by": by or getpass.getuser(), "note": note,
                        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    write_record(root, assignment, student, record)
    return decided
