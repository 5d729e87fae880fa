"""Autograding a class with nbgrader's own Autograde converter, several students at once.

For each submission: take it in (staging.py), grade it into a scratch folder, hold back the autograded points
of a submission flagged for review, and only then move the result into `autograded/` and write its record
(`build/grading/records/`). A run that is killed half-way leaves no finished-looking grade: the next run
grades that submission again. An unchanged submission with a record keeps its grade (and its manual grades).
"""
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde

from . import staging
from .course import coursedir, kernel_env
from .execution import TURN, failure_reason, review_flags, start_submission
from .files import replace_dir, write_atomic
from .preload import preloaded_kernels
from .sandbox import Sandbox


@dataclass
class Outcome:
    assignment: str
    student: str
    status: str  # "graded", "kept" (already graded, unchanged), "failed" (cannot be graded) or "error" (ours)
    reason: str = ""
    seconds: float = 0.0
    score: float | None = None  # points counted now: without points held back for review
    max_score: float | None = None
    cells: dict = field(default_factory=dict)  # test grade_id -> (score, max)
    flags: list = field(default_factory=list)  # why a person must review it (see integrity.py)
    pending: float = 0.0  # points of written answers still waiting for a manual grade
    withheld: float = 0.0  # autograded points held back until a person has reviewed the flags
    notes: list = field(default_factory=list)  # what was set aside or changed on the way


class CourseAutograde(Autograde):
    """nbgrader's Autograde, safe in threads."""

    def convert_single_notebook(self, notebook_filename):
        # As Autograde's, minus `utils.setenv(NBGRADER_EXECUTION=...)`: nbgrader 0.9.6's setenv deletes
        # the variable afterwards, under the feet of other threads. `grade_class` sets it for the run.
        self._sanitizing = True
        self._init_preprocessors()
        super(Autograde, self).convert_single_notebook(notebook_filename)
        notebook_filename = os.path.join(self.writer.build_directory, os.path.basename(notebook_filename))
        self._sanitizing = False
        self._init_preprocessors()
        try:
            super(Autograde, self).convert_single_notebook(notebook_filename)
        finally:
            self._sanitizing = True


def records_dir(root):
    return Path(root) / "build" / "grading" / "records"


def read_record(root, assignment, student):
    try:
        return json.loads((records_dir(root) / assignment / f"{student}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_record(root, assignment, student, record):
    write_atomic(records_dir(root) / assignment / f"{student}.json", json.dumps(record, ensure_ascii=False, indent=1))


def hold_for_review(db_url, assignment, student):
    """Mark the submission's autograded test cells as needing a person: formgrader lists them, and their
    points are not counted until a grader has entered a score."""
    with Gradebook(db_url) as gb:
        for nb in gb.find_submission(assignment, student).notebooks:
            solutions = {c.name for c in nb.notebook.solution_cells}
            for grade in nb.grades:
                if grade.cell.cell_type == "code" and grade.cell.name not in solutions:
                    grade.needs_manual_grade = True
        gb.db.commit()


def counted(submission):
    """(score counted now, max, {grade_id: (score, max)}, pending manual points, withheld points) of a
    gradebook submission: written answers without a manual grade are pending, autograded points of a
    submission on hold for review are withheld until a grader has entered them."""
    cells, pending, withheld = {}, 0.0, 0.0
    for nb in submission.notebooks:
        solutions = {c.name for c in nb.notebook.solution_cells}
        for grade in nb.grades:
            cells[grade.cell.name] = (grade.score or 0.0, grade.max_score)
            waiting = grade.needs_manual_grade and grade.manual_score is None
            if waiting and grade.cell.cell_type == "code" and grade.cell.name not in solutions:
                withheld += grade.score or 0.0
            elif waiting:
                pending += grade.max_score
    return submission.score - withheld, submission.max_score, cells, pending, withheld


def read_scores(db_url, assignment, student):
    with Gradebook(db_url) as gb:
        return counted(gb.find_submission(assignment, student))


def outcome_from_record(cfg, root, assignment, student, status="graded"):
    """The Outcome of a submission graded in an earlier run (None if it never was)."""
    record = read_record(root, assignment, student)
    if record is None:
        return None
    if record.get("status") == "failed":
        return Outcome(assignment, student, "failed", record.get("reason", ""), flags=record.get("flags", []),
                       notes=record.get("notes", []))
    score, maximum, cells, pending, withheld = read_scores(cfg.CourseDirectory.db_url, assignment, student)
    return Outcome(assignment, student, status, "", 0.0, score, maximum, cells, record.get("flags", []), pending,
                   withheld, record.get("notes", []))


def grade_one(cfg, root, intake, scratch, force=False):
    start = time.time()
    a, s = intake.assignment, intake.student
    if intake.reason:  # the student's name is a folder's name, so it can name the record too
        write_record(root, a, s, {"status": "failed", "reason": intake.reason, "notes": intake.notes})
        return Outcome(a, s, "failed", intake.reason, notes=intake.notes)
    db_url = cfg.CourseDirectory.db_url
    dest = Path(root) / "autograded" / s / a
    record = read_record(root, a, s)
    with TURN.held():
        if not force and record and record.get("digest") == intake.digest and (
                dest.is_dir() or record.get("status") == "failed"):
            try:
                return outcome_from_record(cfg, root, a, s, status="kept")
            except MissingEntry:
                pass  # the gradebook lost it: grade again
    start_submission()
    with TURN.held():
        cd = coursedir(cfg, a, s)
        cd.submitted_directory = str(intake.folder.parent.parent)
        cd.autograded_directory = str(scratch)
        converter = CourseAutograde(coursedir=cd, config=cfg)
        converter.force = True
        try:
            converter.start()
        except Exception as exc:  # nbgrader has already removed the half-made autograded copy
            reason = failure_reason() or f"评分失败：{type(exc).__name__}（详见 build/nbgrader.log）"
            write_record(root, a, s, {"digest": intake.digest, "status": "failed", "reason": reason,
                                      "flags": review_flags(), "notes": intake.notes})
            return Outcome(a, s, "failed", reason, time.time() - start, flags=review_flags(), notes=intake.notes)
        flags = review_flags()
        if flags:
            hold_for_review(db_url, a, s)
        replace_dir(Path(scratch) / s / a, dest, scratch)
        write_record(root, a, s, {"digest": intake.digest, "status": "graded", "flags": flags, "notes": intake.notes})
        score, maximum, cells, pending, withheld = read_scores(db_url, a, s)
    return Outcome(a, s, "graded", "", time.time() - start, score, maximum, cells, flags, pending, withheld,
                   intake.notes)


def flag_after_grading(cfg, root, outcome):
    """A flag found after grading (in the feedback): hold the points back and keep it in the record."""
    db_url = cfg.CourseDirectory.db_url
    hold_for_review(db_url, outcome.assignment, outcome.student)
    record = read_record(root, outcome.assignment, outcome.student) or {}
    write_record(root, outcome.assignment, outcome.student, {**record, "flags": outcome.flags})
    outcome.score, _, outcome.cells, outcome.pending, outcome.withheld = read_scores(
        db_url, outcome.assignment, outcome.student)


class SandboxUnavailable(RuntimeError):
    """`c.Sandbox.mode = 'required'` and no sandbox can be made here."""


def sandbox_for(cfg, progress):
    """The Sandbox settings to grade with, or None (after a loud warning) where none can be made."""
    settings = Sandbox(config=cfg)
    if settings.mode == "off":
        progress("⚠ 警告：沙箱已关闭（c.Sandbox.mode = 'off'），学生代码以评分者的身份和权限运行。")
        return None
    problem = settings.problem()
    if not problem:
        return settings
    if settings.mode == "required":
        raise SandboxUnavailable(f"无法建立评分沙箱：{problem}")
    progress(f"⚠ 警告：无法建立评分沙箱（{problem}）。学生代码将以评分者的身份和权限运行，"
             "能读取课程文件与成绩库；正式评分请在 Linux 上以 root 运行并安装 bubblewrap。")
    return None


def released_notebooks(root, assignment):
    """{file name: student version} of an assignment, as released."""
    return {p.name: nbformat.read(p, as_version=4) for p in sorted((Path(root) / "release" / assignment).glob("*.ipynb"))}


def grade_class(cfg, pairs, jobs=1, force=False, progress=print, preload=True):
    """Autograde every (assignment, student) pair of the class folder `cfg.CourseDirectory.submitted_directory`;
    returns their Outcomes in input order.

    `preload`: kernels start as forks of a process that has imported torch and d2l (see preload.py);
    each kernel is sandboxed (sandbox.py) unless no sandbox can be made here or `preload` is False.
    """
    root = Path(cfg.CourseDirectory.root)
    class_dir = root / cfg.CourseDirectory.submitted_directory  # relative paths are the course root's
    work = root / "build" / "grading"
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="run-"))
    released = {a: released_notebooks(root, a) for a in sorted({a for a, _ in pairs})}
    intakes = [staging.stage(class_dir / s / a, scratch / "staged" / s / a, a, released[a]) for a, s in pairs]
    sandbox = sandbox_for(cfg, progress) if preload else None
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(kernel_env(jobs))  # set once for the run: nbgrader's per-call setenv races in threads
    results = {}
    try:
        with preloaded_kernels(progress, sandbox) if preload else nullcontext(), \
                ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(grade_one, cfg, root, intake, scratch / "autograded", force):
                       (intake.assignment, intake.student) for intake in intakes}
            for done, future in enumerate(as_completed(futures), 1):
                key = futures[future]
                try:
                    outcome = future.result()
                except Exception as exc:  # a toolchain error, not the student's: the caller stops on it
                    outcome = Outcome(*key, "error", f"{type(exc).__name__}: {exc}")
                results[key] = outcome
                progress(f"[{done}/{len(pairs)}] {describe(outcome)}")
    finally:  # nbgrader's converters chdir to the course root, from several threads
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        shutil.rmtree(scratch, ignore_errors=True)
    return [results[p] for p in pairs]


def describe(o):
    head = f"{o.assignment:14s} {o.student:18s}"
    review = f"  ⚠ 需人工复核（{o.withheld:g} 分暂不计入）：{'；'.join(o.flags)}" if o.flags else ""
    if o.status in ("graded", "kept"):
        mark = "✔" if o.status == "graded" else "＝"
        manual = f"（{o.pending:g} 分待人工评分）" if o.pending else ""
        return f"{head} {mark} {o.score:g}/{o.max_score:g}{manual}  ({o.seconds:.1f} s){review}"
    return f"{head} ✘ {o.reason}  ({o.seconds:.1f} s)"
