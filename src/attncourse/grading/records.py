"""What grading keeps between runs: a record per submission (`build/grading/records/`) and the gradebook's
scores read as a `Scores`. Written by the run stage, read by every later one."""
import json
from pathlib import Path

from nbgrader.api import Gradebook

from .cells import is_test_grade
from .files import write_atomic
from .model import Outcome, Scores, Status


def records_dir(root) -> Path:
    return Path(root) / "build" / "grading" / "records"


def read_record(root, assignment: str, student: str) -> dict | None:
    try:
        return json.loads((records_dir(root) / assignment / f"{student}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_record(root, assignment: str, student: str, record: dict) -> None:
    write_atomic(records_dir(root) / assignment / f"{student}.json", json.dumps(record, ensure_ascii=False, indent=1))


def counted(submission) -> Scores:
    """The Scores of a gradebook submission: written answers without a manual grade are pending, autograded
    points of a submission on hold for review are withheld until a grader has entered them."""
    cells, pending, withheld = {}, 0.0, 0.0
    for nb in submission.notebooks:
        solutions = {c.name for c in nb.notebook.solution_cells}
        for grade in nb.grades:
            cells[grade.cell.name] = (grade.score or 0.0, grade.max_score)
            waiting = grade.needs_manual_grade and grade.manual_score is None
            if waiting and is_test_grade(grade, solutions):
                withheld += grade.score or 0.0
            elif waiting:
                pending += grade.max_score
    return Scores(submission.score - withheld, submission.max_score, cells, pending, withheld)


def read_scores(db_url: str, assignment: str, student: str) -> Scores:
    with Gradebook(db_url) as gb:
        return counted(gb.find_submission(assignment, student))


def hold_for_review(db_url: str, assignment: str, student: str, cells=None) -> list:
    """Mark the submission's autograded test cells `cells` (default: all) as needing a person: formgrader lists
    them, and their points are not counted until a grader has decided (`course review` or a score entered).
    Returns the names of the cells held."""
    held = []
    with Gradebook(db_url) as gb:
        for nb in gb.find_submission(assignment, student).notebooks:
            solutions = {c.name for c in nb.notebook.solution_cells}
            for grade in nb.grades:
                if is_test_grade(grade, solutions) and (cells is None or grade.cell.name in cells):
                    grade.needs_manual_grade = True
                    held.append(grade.cell.name)
        gb.db.commit()
    return sorted(held)


def outcome_from_record(db_url: str, root, assignment: str, student: str, status=Status.GRADED) -> Outcome | None:
    """The Outcome of a submission graded in an earlier run (None if it never was)."""
    record = read_record(root, assignment, student)
    if record is None:
        return None
    flags, notes = record.get("flags", []), record.get("notes", [])
    if record.get("status") == Status.FAILED:
        return Outcome(assignment, student, Status.FAILED, record.get("reason", ""), flags=flags, notes=notes)
    return Outcome(assignment, student, status, flags=flags, notes=notes,
                   diagnoses=record.get("diagnoses", {})).take_scores(read_scores(db_url, assignment, student))
