"""Autograding a class with nbgrader's own Autograde converter, several students at once."""
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde

from .course import coursedir, kernel_env
from .execution import TURN, failure_reason, review_flags, start_submission
from .preload import preloaded_kernels
from .sandbox import Sandbox


@dataclass
class Outcome:
    assignment: str
    student: str
    status: str  # "graded", "kept" (already graded, unchanged) or "failed"
    reason: str = ""
    seconds: float = 0.0
    score: float | None = None
    max_score: float | None = None
    cells: dict = field(default_factory=dict)  # test grade_id -> (score, max)
    flags: list = field(default_factory=list)  # reasons to review by hand (see integrity.py)
    pending: float = 0.0  # points still waiting for a manual grade


class CourseAutograde(Autograde):
    """nbgrader's Autograde, safe in threads, that tells whether it graded or kept an earlier result."""

    kept = False

    def init_destination(self, assignment_id, student_id):
        go = super().init_destination(assignment_id, student_id)
        self.kept = not go
        return go

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


def corrupt_reason(folder):
    """Why a submitted folder cannot be graded before any kernel starts, or ''."""
    notebooks = sorted(Path(folder).glob("*.ipynb"))
    if not notebooks:
        return "提交中没有 .ipynb 文件"
    for path in notebooks:
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as exc:  # anything nbformat cannot read or validate
            return f"损坏的 notebook：{path.name} 无法读取（{type(exc).__name__}）"
    return ""


def read_scores(db_url, assignment, student):
    """(total, max, {grade_id: (score, max)}, points awaiting a manual grade) from the gradebook."""
    cells, pending = {}, 0.0
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(assignment, student)
        for nb in submission.notebooks:
            for grade in nb.grades:
                score = grade.score or 0.0
                cells[grade.cell.name] = (score, grade.max_score)
                if grade.needs_manual_grade and grade.manual_score is None:
                    pending += grade.max_score
        return submission.score, submission.max_score, cells, pending


def grade_one(cfg, assignment, student, force=False):
    start = time.time()
    cd = coursedir(cfg, assignment, student)
    folder = Path(cd.format_path(cd.submitted_directory, student, assignment))
    reason = corrupt_reason(folder)
    if reason:
        return Outcome(assignment, student, "failed", reason, time.time() - start)
    start_submission()
    with TURN.held():
        converter = CourseAutograde(coursedir=cd, config=cfg)
        converter.force = force
        try:
            converter.start()
        except Exception as exc:  # nbgrader has already removed the half-made autograded copy
            reason = failure_reason() or f"评分失败：{type(exc).__name__}（详见 build/nbgrader.log）"
            return Outcome(assignment, student, "failed", reason, time.time() - start, flags=review_flags())
        status = "kept" if converter.kept else "graded"
        total, maximum, cells, pending = read_scores(cd.db_url, assignment, student)
    return Outcome(assignment, student, status, "", time.time() - start, total, maximum, cells, review_flags(),
                   pending)


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


def grade_class(cfg, pairs, jobs=1, force=False, progress=print, preload=True):
    """Autograde every (assignment, student) pair; returns their Outcomes in input order.

    `preload`: kernels start as forks of a process that has imported torch and d2l (see preload.py);
    each kernel is sandboxed (sandbox.py) unless no sandbox can be made here or `preload` is False.
    """
    sandbox = sandbox_for(cfg, progress) if preload else None
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(kernel_env(jobs))  # set once for the run: nbgrader's per-call setenv races in threads
    results = {}
    try:
        with preloaded_kernels(progress, sandbox) if preload else nullcontext(), \
                ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(grade_one, cfg, a, s, force): (a, s) for a, s in pairs}
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
    return [results[p] for p in pairs]


def describe(o):
    head = f"{o.assignment:14s} {o.student:18s}"
    review = f"  ⚠ 需人工复核：{'；'.join(o.flags)}" if o.flags else ""
    if o.status in ("graded", "kept"):
        mark = "✔" if o.status == "graded" else "＝"
        manual = f"（{o.pending:g} 分待人工评分）" if o.pending else ""
        return f"{head} {mark} {o.score:g}/{o.max_score:g}{manual}  ({o.seconds:.1f} s){review}"
    return f"{head} ✘ {o.reason}  ({o.seconds:.1f} s)"
