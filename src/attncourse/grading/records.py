"""What grading keeps between runs, and the one place that writes it.

Two stores, written only here: a record per submission (`build/grading/records/<a>/<student>.json`, a `Record`)
and the gradebook's grades as the course counts them. A submission held for review has its held test cells
marked for a person in the gradebook (`needs_manual_grade`, the notebook `flagged`: formgrader lists both) and
their autograded points set aside in the record, so that no list counts them before a person has decided. One
decision, three ways to take it, one result: `course review --accept`/`--reject`, or scores entered in formgrader
(publish/formgrader.py calls `formgrader_graded`), each recorded with who and when in the record's `Review`.
Every stage reads through here: `Outcome`s for the report, the export and the console come from `outcome`.
"""
import datetime
import getpass
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nbgrader.api import Grade, Gradebook, MissingEntry, SubmittedAssignment, SubmittedNotebook

from .cells import is_test_grade
from .files import write_atomic
from .model import Outcome, Review, Scores, Status

ACCEPTED, REJECTED, FORMGRADER = "accepted", "rejected", "formgrader"


@dataclass
class Record:
    """What one grading run found about a submission, and what a person decided about it since."""
    status: Status
    digest: str = ""  # of what was staged: an unchanged submission keeps its grade
    reason: str = ""  # why it could not be graded
    flags: list[str] = field(default_factory=list)  # why a person must review it
    held: dict[str, float] = field(default_factory=dict)  # test cell -> autograded points set aside for review
    notes: list[str] = field(default_factory=list)  # what was set aside or changed on the way
    diagnoses: dict[str, dict[str, str]] = field(default_factory=dict)  # failed test -> {"id", "label"}
    review: Review | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Record":
        data = json.loads(text)
        review = data.pop("review", None)
        held = data.pop("held", {})
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "status": Status(known["status"])},
                   held=held if isinstance(held, dict) else {},
                   review=Review(**review) if isinstance(review, dict) else None)


def records_dir(root: str | Path) -> Path:
    return Path(root) / "build" / "grading" / "records"


def read_record(root: str | Path, assignment: str, student: str) -> Record | None:
    try:
        return Record.from_json((records_dir(root) / assignment / f"{student}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_record(root: str | Path, assignment: str, student: str, record: Record) -> None:
    write_atomic(records_dir(root) / assignment / f"{student}.json", record.to_json())


def _test_grades(submission: SubmittedAssignment) -> Iterator[tuple[SubmittedNotebook, Grade]]:
    for nb in submission.notebooks:
        solutions = {c.name for c in nb.notebook.solution_cells}
        for grade in nb.grades:
            if is_test_grade(grade, solutions):
                yield nb, grade


def _waits(grade: Grade) -> bool:
    return bool(grade.needs_manual_grade) and grade.manual_score is None


def counted(submission: SubmittedAssignment, record: Record | None) -> Scores:
    """The Scores of a gradebook submission: written answers without a manual grade are pending; the points of test
    cells held for review (set aside in `record`) are withheld until a person has decided."""
    cells: dict[str, tuple[float, float]] = {}
    pending = withheld = 0.0
    held = record.held if record else {}
    for nb in submission.notebooks:
        solutions = {c.name for c in nb.notebook.solution_cells}
        for grade in nb.grades:
            name, waiting, test = grade.cell.name, _waits(grade), is_test_grade(grade, solutions)
            if test and waiting and name in held:
                withheld += held[name]
                cells[name] = (held[name], grade.max_score)
                continue
            cells[name] = (grade.score or 0.0, grade.max_score)
            if waiting and not test:
                pending += grade.max_score
    return Scores(submission.score, submission.max_score, cells, pending, withheld)


def read_scores(db_url: str, root: str | Path, assignment: str, student: str) -> Scores:
    with Gradebook(db_url) as gb:
        return counted(gb.find_submission(assignment, student), read_record(root, assignment, student))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def hold(db_url: str, assignment: str, student: str, cells: set[str] | None,
         already: dict[str, float] | None = None) -> dict[str, float]:
    """Hold test cells `cells` (None: all) of a submission for review: their autograded points set aside (returned,
    with those `already` held, for the record), the cells marked for a person, the notebook flagged in formgrader."""
    held = dict(already or {})
    with Gradebook(db_url) as gb:
        for nb, grade in _test_grades(gb.find_submission(assignment, student)):
            name = grade.cell.name
            if (cells is None or name in cells) and grade.manual_score is None:
                held.setdefault(name, grade.auto_score or 0.0)
                grade.auto_score = 0.0
                grade.needs_manual_grade = True
                nb.flagged = True
        gb.db.commit()
    return held


def decide(db_url: str, root: str | Path, assignment: str, student: str, accept: bool, by: str = "",
           note: str = "") -> float:
    """Accept (the autograded points count) or reject (0) the held points of one submission; returns how many
    points were decided. The cells stop waiting in formgrader and the notebook is no longer flagged."""
    record = read_record(root, assignment, student)
    decided = 0.0
    with Gradebook(db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            raise ValueError(f"成绩库中没有 {student} 的 {assignment}") from None
        held = record.held if record else {}
        for nb, grade in _test_grades(submission):
            if _waits(grade) and grade.cell.name in held:
                decided += held[grade.cell.name]
                if accept:
                    grade.auto_score = held[grade.cell.name]
                else:
                    grade.manual_score = 0.0
                grade.needs_manual_grade = False
                nb.flagged = False
        gb.db.commit()
    if record is None or (not decided and not record.flags):
        raise ValueError(f"{student} 的 {assignment} 没有待复核的分数")
    record.review = Review(ACCEPTED if accept else REJECTED, decided, by or getpass.getuser(), _now(), note,
                           list(record.flags))
    write_record(root, assignment, student, record)
    return decided


def formgrader_graded(db_url: str, root: str | Path, grade_id: str, by: str) -> None:
    """A score entered in formgrader for grade `grade_id`: once no held cell of its submission waits any more, the
    TA's scores are the decision, recorded with who and when."""
    with Gradebook(db_url) as gb:
        try:
            grade = gb.find_grade_by_id(grade_id)
        except MissingEntry:
            return
        nb = grade.notebook
        assignment, student = nb.assignment.assignment.name, nb.assignment.student.id
        record = read_record(root, assignment, student)
        if record is None or record.review is not None or grade.cell.name not in record.held:
            return
        graded = [g for _, g in _test_grades(nb.assignment) if g.cell.name in record.held]
        if any(_waits(g) for g in graded):
            return
        points = sum((g.manual_score if g.manual_score is not None else g.auto_score) or 0.0 for g in graded)
        for n in nb.assignment.notebooks:
            n.flagged = False
        gb.db.commit()
    record.review = Review(FORMGRADER, points, by, _now(), "在 formgrader 中逐个给分", list(record.flags))
    write_record(root, assignment, student, record)


@dataclass
class Waiting:
    assignment: str
    student: str
    points: float  # autograded points held
    flags: list[str]


def waiting(db_url: str, root: str | Path, pairs: list[tuple[str, str]]) -> list[Waiting]:
    """The submissions among `pairs` [(assignment, student)] with points held for review."""
    found = []
    for assignment, student in pairs:
        try:
            scores = read_scores(db_url, root, assignment, student)
        except MissingEntry:
            continue
        if scores.withheld:
            record = read_record(root, assignment, student)
            found.append(Waiting(assignment, student, scores.withheld, record.flags if record else []))
    return found


def outcome(db_url: str, root: str | Path, assignment: str, student: str,
            status: Status = Status.GRADED) -> Outcome | None:
    """The Outcome of a submission graded in an earlier run (None if it never was)."""
    record = read_record(root, assignment, student)
    if record is None:
        return None
    if record.status == Status.FAILED:
        return Outcome(assignment, student, Status.FAILED, record.reason, flags=record.flags, notes=record.notes)
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(assignment, student)
        name = f"{submission.student.last_name or ''}{submission.student.first_name or ''}"
        scores = counted(submission, record)
    return Outcome(assignment, student, status, flags=record.flags, notes=record.notes, diagnoses=record.diagnoses,
                   review=record.review, name=name).take_scores(scores)

