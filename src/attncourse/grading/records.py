"""What grading keeps between runs, and the one place that writes it.

Two stores, written only here: a record per submission (`build/grading/records/<a>/<student>.json`, a `Record`)
and the gradebook's grades as the course counts them. A submission held for review has its held test cells
marked for a person in the gradebook (`needs_manual_grade`, the notebook `flagged`: formgrader lists both) and
their autograded points set aside in the record, so that no list counts them before a person has decided. One
decision, three ways to take it, one result: `course review --accept`/`--reject`, formgrader's accept and reject,
or the held cells scored one by one in formgrader (publish/formgrader.py calls `formgrader_graded`), each
recorded with who (a person's name, `reviewer`) and when in the record's `Review`. Intake records the students
whose upload could not be taken in (`not_collected`). Every stage reads through here: the `Outcome` of every
student the gradebook (the roster) names comes from `class_outcomes`, one per student and assignment.
"""
import datetime
import getpass
import json
import pwd
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nbgrader.api import Grade, Gradebook, GradeCell, MissingEntry, SubmittedAssignment, SubmittedNotebook, TaskCell
from sqlalchemy.orm import object_session, undefer
from traitlets import Unicode
from traitlets.config import Config, Configurable

from .cells import is_test_grade
from .course import grading_dir
from .files import write_atomic
from .model import Hold, HoldKind, Outcome, Review, Scores, Status

RECORDED = (Status.GRADED, Status.FAILED, Status.NOT_COLLECTED)  # what a record's status can be
NOT_A_PERSON = ("", "root", "admin", "jovyan", "nobody")  # logins that name no reviewer


class Reviewer(Configurable):
    """Who decides reviews here (`c.Reviewer.name` in nbgrader_config.py, or a TA's own config file)."""

    name = Unicode("", help="The reviewer's name recorded with each decision made on this machine, when the "
                            "decision does not name one (`course review --by`, formgrader's field) and the "
                            "Jupyter server knows no logged-in user.").tag(config=True)


def reviewer(cfg: Config, given: str = "") -> str:
    """The name a review decision is signed with: `given` (the command's --by, formgrader's field, the logged-in
    user), else `c.Reviewer.name`, else this machine's user (with the full name the system has for it), never
    an anonymous or administrative login. ValueError says how to give one."""
    name = " ".join(given.split()) or " ".join(Reviewer(config=cfg).name.split())
    if not name:
        login = getpass.getuser()
        if login.lower() not in NOT_A_PERSON and not login.lower().startswith("anonymous"):
            try:
                full = pwd.getpwnam(login).pw_gecos.split(",")[0].strip()
            except KeyError:
                full = ""
            name = f"{full}（{login}）" if full and full != login else login
    if not name or name.lower().startswith("anonymous") or name.lower() in NOT_A_PERSON:
        raise ValueError("复核决定要写明复核人：course review … --by <姓名>，或在 nbgrader_config.py 中设置 "
                         "c.Reviewer.name = \"<姓名>\" / a review decision needs the reviewer's name")
    return name


@dataclass
class Record:
    """What one grading run (or intake) found about a submission, and what a person decided about it since."""
    status: Status  # one of RECORDED
    digest: str = ""  # of what was staged: an unchanged submission keeps its grade
    reason: str = ""  # why it could not be graded or collected
    holds: list[Hold] = field(default_factory=list)  # why a person must review it
    held: dict[str, float] = field(default_factory=dict)  # test cell -> autograded points set aside for review
    notes: list[str] = field(default_factory=list)  # what was set aside or changed on the way
    diagnoses: dict[str, dict[str, str]] = field(default_factory=dict)  # failed test -> {"id", "label"}
    review: Review | None = None

    @property
    def flags(self) -> list[str]:
        return [str(h) for h in self.holds]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Record":
        data = json.loads(text)
        review = data.pop("review", None)
        held = data.pop("held", {})
        holds = data.pop("holds", [])
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "status": Status(known["status"])},
                   held=held if isinstance(held, dict) else {},
                   holds=[Hold(**{**h, "kind": HoldKind(h["kind"])}) for h in holds],
                   review=Review(**{**review, "decision": Status(review["decision"])})
                   if isinstance(review, dict) else None)


def records_dir(root: str | Path) -> Path:
    return grading_dir(root) / "records"


def read_record(root: str | Path, assignment: str, student: str) -> Record | None:
    try:
        return Record.from_json((records_dir(root) / assignment / f"{student}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_record(root: str | Path, assignment: str, student: str, record: Record) -> None:
    write_atomic(records_dir(root) / assignment / f"{student}.json", record.to_json())


def _grades(nb: SubmittedNotebook) -> list[Grade]:
    """A submitted notebook's grades with their cells and maximum scores, in three queries: nbgrader's own objects
    read each grade's cell type, and its maximum score, with a query each as they are first used."""
    session = object_session(nb)
    assert session is not None  # every caller reads it through a Gradebook
    for kind in (GradeCell, TaskCell):  # the session keeps them: each grade finds its cell there
        session.query(kind).filter(kind.notebook_id == nb.notebook_id).all()
    return list(session.query(Grade).options(undefer(Grade.max_score)).filter(Grade.notebook_id == nb.id))


def _test_grades(submission: SubmittedAssignment) -> Iterator[tuple[SubmittedNotebook, Grade]]:
    for nb in submission.notebooks:
        solutions = {c.name for c in nb.notebook.solution_cells}
        for grade in _grades(nb):
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
        for grade in _grades(nb):
            name, waiting, test = grade.cell.name, _waits(grade), is_test_grade(grade, solutions)
            if test and waiting and name in held:
                withheld += held[name]
                cells[name] = (held[name], grade.max_score)
                continue
            cells[name] = (grade.score or 0.0, grade.max_score)
            if waiting and not test:
                pending += grade.max_score
    return Scores(submission.score, submission.max_score, cells, pending, withheld)


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


def decide(db_url: str, root: str | Path, assignment: str, student: str, accept: bool, by: str,
           note: str = "") -> float:
    """Accept (the autograded points count) or reject (0) the held points of one submission, signed by `by`
    (`reviewer`); returns how many points were decided. The cells stop waiting in formgrader, get their autograded
    points back (so "Tests Failed?" says what the tests found) and the notebook is no longer flagged; a rejected
    cell's score is a manual 0."""
    if not by:
        raise ValueError("复核决定要写明复核人 / a review decision needs the reviewer's name")
    record = read_record(root, assignment, student)
    if record is not None and record.review is not None:
        raise ValueError(f"{student} 的 {assignment} 已经复核过：{record.review.describe()} / already decided")
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
                grade.auto_score = held[grade.cell.name]
                grade.manual_score = None if accept else 0.0
                grade.needs_manual_grade = False
                nb.flagged = False
        if record is None or (not decided and not record.holds):
            raise ValueError(f"{student} 的 {assignment} 没有待复核的分数")
        gb.db.commit()
    record.review = Review(Status.ACCEPTED if accept else Status.REJECTED, decided, by, _now(), note, record.flags)
    write_record(root, assignment, student, record)
    return decided


def formgrader_graded(db_url: str, root: str | Path, grade_id: str, by: str) -> None:
    """A score entered in formgrader for grade `grade_id`: once no held cell of its submission waits any more, the
    TA's scores are the decision, recorded with who and when; the held cells get their autograded points back
    beside the TA's scores."""
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
        for g in graded:
            g.auto_score = record.held[g.cell.name]
        for n in nb.assignment.notebooks:
            n.flagged = False
        gb.db.commit()
    record.review = Review(Status.REVIEWED, points, by, _now(), "在 formgrader 中逐题给分", record.flags)
    write_record(root, assignment, student, record)


def not_collected(root: str | Path, assignment: str, student: str, reason: str, notes: list[str]) -> None:
    """Record that the LMS download names `student` but nothing of theirs could be taken in, and why."""
    write_record(root, assignment, student, Record(Status.NOT_COLLECTED, reason=reason, notes=notes))


def forget_not_collected(root: str | Path, assignment: str, student: str) -> None:
    """A submission of `student` was taken in after all: an earlier "not collected" record no longer holds."""
    record = read_record(root, assignment, student)
    if record is not None and record.status == Status.NOT_COLLECTED:
        (records_dir(root) / assignment / f"{student}.json").unlink()


@dataclass
class Waiting:
    assignment: str
    student: str
    points: float  # autograded points held
    flags: list[str]


def waiting(outcomes: list[Outcome]) -> list[Waiting]:
    """The outcomes with points held for review."""
    return [Waiting(o.assignment, o.student, o.withheld, o.flags) for o in outcomes if o.status == Status.HELD]


def full_name(gb: Gradebook, student: str) -> str:
    """The student's name as the gradebook (the roster) has it, surname first; "" if none."""
    try:
        found = gb.find_student(student)
    except MissingEntry:
        return ""
    return f"{found.last_name or ''}{found.first_name or ''}"


def outcome(gb: Gradebook, root: str | Path, assignment: str, student: str) -> Outcome | None:
    """The Outcome of a submission graded, failed or refused in an earlier run or intake, or graded by plain
    `nbgrader autograde` (in the gradebook, no record); None if none was."""
    record = read_record(root, assignment, student)
    name = full_name(gb, student)
    if record is None:
        try:
            plain = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        return Outcome(assignment, student, Status.GRADED, name=name).take_scores(counted(plain, None))
    if record.status != Status.GRADED:
        return Outcome(assignment, student, record.status, record.reason, holds=record.holds, notes=record.notes,
                       name=name)
    try:
        submission = gb.find_submission(assignment, student)
    except MissingEntry:
        return None  # the gradebook lost it: it is graded again
    held = bool(record.held) and record.review is None
    status = record.review.decision if record.review else Status.HELD if held else Status.GRADED
    return Outcome(assignment, student, status, holds=record.holds, notes=record.notes, diagnoses=record.diagnoses,
                   review=record.review, name=name, held_cells=sorted(record.held)).take_scores(
        counted(submission, record))


def read_outcome(db_url: str, root: str | Path, assignment: str, student: str) -> Outcome | None:
    with Gradebook(db_url) as gb:
        return outcome(gb, root, assignment, student)


def recorded(root: str | Path, assignment: str) -> list[str]:
    """The students with a record for `assignment`."""
    return sorted(p.stem for p in (records_dir(root) / assignment).glob("*.json"))


def class_outcomes(gb: Gradebook, root: str | Path, assignments: list[str],
                   submitted: list[tuple[str, str]]) -> list[Outcome]:
    """One Outcome per student and assignment, for every student the gradebook (the roster, the students
    collected) names and every assignment of `assignments` that has anything collected or recorded; `submitted`
    [(assignment, student)] are the submissions in the class folder. Graded, held, decided, failed and not
    collected come from the records; a submission not yet graded is COLLECTED, a student without one MISSING."""
    in_folder = set(submitted)
    found: list[Outcome] = []
    students = {s.id for s in gb.students}
    for a in assignments:
        seen = {s for aa, s in in_folder if aa == a} | set(recorded(root, a))
        if not seen:
            continue  # nothing collected for it yet: nobody is missing it
        for s in sorted(students | seen):
            o = outcome(gb, root, a, s)
            if o is None or (o.status == Status.NOT_COLLECTED and (a, s) in in_folder):
                o = (Outcome(a, s, Status.COLLECTED, "已收取，尚未评分：运行 course grade", name=full_name(gb, s))
                     if (a, s) in in_folder else
                     Outcome(a, s, Status.MISSING, "没有提交（LMS 下载中没有这名学生的文件）", name=full_name(gb, s)))
            found.append(o)
    return found
