"""The instructor's steps over a semester, and the one-command demo that runs them all on a scratch course.

A real class lives in the course folder: `course release` → students work → `course collect` → `course grade`
→ formgrader for the written answers → `course feedback`, `course report`, `course export`. Grading always
uses what was released (the tests stored in the gradebook), never regenerates, and keeps manual grades.

`course build` runs the same steps on the demo class in `build/demo/`, a course of its own with its own
gradebook and release record, so the demo never touches a real class.
"""
import html
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from traitlets.config import Config
from nbgrader.apps import ExportApp
from nbgrader.converters import GenerateFeedback
from nbgrader.converters.base import NbGraderException

from .. import slides
from . import autograde, collect, demo, feedback, logs, release, report
from .course import assignments, copy_course_files, coursedir, nbgrader_config, submissions
from .files import replace_dir
from .variants import test_cell_ids

DEMO_FILES = ["course.toml", "nbgrader_config.py", "source", "catalog"]


class ToolchainError(Exception):
    """The course's own tools failed, or the instructor's input cannot be used (not a student's code)."""


def step(title):
    print(f"\n== {title} ==", flush=True)


def _log(root):
    (Path(root) / "build").mkdir(exist_ok=True)
    return logs.to_file(Path(root) / "build" / "nbgrader.log")


# --- release ---------------------------------------------------------------------------------------------------

def release_assignments(root, ids, force=False):
    root = Path(root)
    log = _log(root)
    cfg = nbgrader_config(root)
    for aid in ids or assignments(root):
        try:
            for path in release.release(cfg, root, aid, force=force):
                print(f"  ✔ {path.relative_to(root)}")
        except NbGraderException as exc:
            raise ToolchainError(f"nbgrader generate_assignment 失败：\n{logs.tail(log)}") from exc


def released_ids(root, ids=None):
    """The assignments to work on: those asked for, which must have been released, or every released one."""
    done = release.record(root)
    if not ids:
        return sorted(done)
    missing = [a for a in ids if a not in done]
    if missing:
        raise ToolchainError(f"{'、'.join(missing)} 尚未发布：先运行 course release {' '.join(missing)}")
    return list(ids)


# --- collect ---------------------------------------------------------------------------------------------------

def collect_download(root, source, assignment):
    root = Path(root)
    [assignment] = released_ids(root, [assignment])
    names = [p.name for p in sorted((root / "release" / assignment).glob("*.ipynb"))]
    result = collect.collect(nbgrader_config(root), root, Path(source), assignment, names)
    for student, notebook, when in result.taken:
        print(f"  ✔ {student}/{assignment}/{notebook}（{when:%Y-%m-%d %H:%M}）")
    for line in result.notes:
        print(f"  ＝ {line}")
    for name, why in result.unmatched:
        print(f"  ✘ 未收集 {name}：{why}")
    print(f"  收集 {len({s for s, _, _ in result.taken})} 名学生；{len(result.unmatched)} 个文件未能匹配")
    return result


# --- grade, feedback, report, export ---------------------------------------------------------------------------

def grade(root, ids=None, student=None, jobs=2, class_dir=None):
    """Grade submitted/ (after importing `class_dir`, a folder laid out as <student>/<assignment>/)."""
    root = Path(root)
    _log(root)
    ids = released_ids(root, ids)
    cfg = nbgrader_config(root)
    if class_dir is not None:
        for line in collect.import_class(cfg, root, Path(class_dir), ids):
            print(f"  ＝ {line}")
    for aid in ids:
        for note in release.changes_since_release(root, aid) or []:
            print(f"  ⚠ {note}：评分仍按发布时存入成绩库的测试进行（重新发布：course release {aid} --force）")
    submitted = root / cfg.CourseDirectory.submitted_directory
    pairs = [p for p in submissions(submitted, ids) if student is None or p[1] == student] if submitted.is_dir() else []
    if not pairs:
        raise ToolchainError(f"{submitted} 中没有找到 {'、'.join(ids)} 的提交" + (f"（学生 {student}）" if student else ""))
    step(f"自动评分 {len(pairs)} 份提交（{jobs} 个并行）")
    start = time.time()
    try:
        outcomes = autograde.grade_class(cfg, pairs, jobs=jobs, force=student is not None)
    except autograde.SandboxUnavailable as exc:
        raise ToolchainError(str(exc)) from exc
    print(f"  用时 {time.time() - start:.1f} s")
    broken = [o for o in outcomes if o.status == "error"]
    if broken:
        raise ToolchainError("评分工具出错：" + "; ".join(f"{o.student}/{o.assignment}: {o.reason}" for o in broken))
    step("汇总")
    print(report.summary_table(outcomes))
    return outcomes


def graded_outcomes(root, ids=None):
    """The Outcomes of every graded submission in submitted/, read back from the records and the gradebook."""
    root = Path(root)
    cfg = nbgrader_config(root)
    submitted = root / cfg.CourseDirectory.submitted_directory
    pairs = submissions(submitted, released_ids(root, ids)) if submitted.is_dir() else []
    found = [autograde.outcome_from_record(cfg, root, a, s) for a, s in pairs]
    return [o for o in found if o is not None]


def publish_feedback(root, outcomes):
    """Each graded student's feedback, written to a scratch folder, checked for hidden-test lines (the released
    tests, from the gradebook, less what the student version shows and the student's own cells), and only then
    published in feedback/. A failure or a leak stays on the student's row."""
    root = Path(root)
    _log(root)
    cfg = nbgrader_config(root)
    hidden = {a: hidden_lines(cfg, a) - notebook_lines(sorted((root / "release" / a).glob("*.ipynb")))
              for a in {o.assignment for o in outcomes}}
    work = root / "build" / "grading"
    work.mkdir(parents=True, exist_ok=True)
    mathjax = vendor_file(root, "mathjax3/es5/tex-svg.js")
    if mathjax is None:
        print("  ⚠ 找不到 MathJax 3（scripts/setup.sh 安装到 build/vendor）：反馈中的公式将显示为 TeX 源码")
    published = 0
    for o in outcomes:
        if o.status not in ("graded", "kept"):
            continue
        with tempfile.TemporaryDirectory(dir=work, prefix="feedback-") as scratch:
            cd = coursedir(cfg, o.assignment, o.student)
            cd.feedback_directory = scratch
            converter = GenerateFeedback(coursedir=cd, config=cfg)
            converter.force = True
            try:
                converter.start()
            except Exception as exc:  # nbgrader logs the details; the others' feedback goes on
                o.notes.append(f"反馈生成失败（{type(exc).__name__}，详见 build/nbgrader.log）")
                continue
            made = Path(scratch) / o.student / o.assignment
            watch = hidden[o.assignment] - notebook_lines(sorted((root / "autograded" / o.student / o.assignment)
                                                                 .glob("*.ipynb")), skip_tests=True)
            pages = {p.name: page_text(p) for p in sorted(made.rglob("*")) if p.is_file()}
            leaked = [name for name, text in pages.items() if any(line in text for line in watch)]
            if leaked:
                o.flags.append(f"反馈（{'、'.join(leaked)}）中出现了隐藏测试的内容，反馈已扣留")
                autograde.flag_after_grading(cfg, root, o)
                shutil.rmtree(root / "feedback" / o.student / o.assignment, ignore_errors=True)
                continue
            if mathjax:
                link_or_copy(mathjax, made / feedback.MATHJAX)
            replace_dir(made, root / "feedback" / o.student / o.assignment, scratch)
            published += 1
    print(f"  ✔ feedback/：{published} 份反馈")


def vendor_file(root, name):
    """A file of the npm packages setup.sh installs in build/vendor/, here or in a course folder above."""
    for folder in (Path(root).resolve(), *Path(root).resolve().parents):
        path = folder / "build" / "vendor" / "node_modules" / name
        if path.is_file():
            return path
    return None


def link_or_copy(src, dest):
    """A hard link (the same file for every student's page costs no space), or a copy across file systems."""
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def page_text(path):
    """The text a page shows: tags removed (code is split into highlighted tokens), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8", errors="replace")))


def notebook_lines(paths, skip_tests=False):
    """Stripped lines of the notebooks' cells (without test cells: a student's feedback shows their own cells,
    and a line that is the student's own or the student version's is no leak)."""
    lines = set()
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if not (skip_tests and meta.get("grade") and not meta.get("solution") and cell.cell_type == "code"):
                lines.update(line.strip() for line in cell.source.splitlines())
    return lines


def hidden_lines(cfg, assignment):
    """Distinctive lines of the released hidden tests, as the gradebook stores them."""
    with Gradebook(cfg.CourseDirectory.db_url) as gb:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for n in gb.find_assignment(
            assignment).notebooks for c in n.source_cells if c.cell_type == "code"])
    return release.secret_lines(nb, hidden_only=True)


def write_report(root, outcomes, build_dir=None):
    root = Path(root)
    build_dir = Path(build_dir or root / "build")
    csv_path = build_dir / "grades.csv"
    report.write_grades_csv(outcomes, csv_path)
    print(f"  ✔ {csv_path.relative_to(root)}")
    cells = {aid: [cell for nb in sorted((root / "release" / aid).glob("*.ipynb"))
                   for cell in test_cell_ids(nbformat.read(nb, as_version=4))] for aid in {o.assignment for o in outcomes}}
    path = report.write_report(outcomes, build_dir / "report", cells)
    print(f"  ✔ {path.relative_to(root)}，{path.with_suffix('.html').relative_to(root)}")


def export_grades(root, to):
    """nbgrader's export with the course's plugin (`c.ExportApp.plugin_class`): the LMS CSV."""
    root = Path(root)
    _log(root)
    app = ExportApp()
    app.initialize([], root=str(root))
    app.update_config(Config({"ExportPlugin": {"to": str(to)}}))
    app.start()
    print(f"  ✔ {to}")


# --- the demo -------------------------------------------------------------------------------------------------

def build_slides(root, out_dir, node_modules):
    step("运行讲义并生成离线幻灯片")
    out_dir.mkdir(parents=True, exist_ok=True)
    slides.copy_vendor(node_modules, out_dir)
    for deck in sorted((root / "notebooks").glob("*.ipynb")):
        nb, seconds = slides.execute(deck)
        target = slides.write_slides(nb, deck, out_dir)
        print(f"  ✔ {deck.name}: {seconds:.1f} s → {target.relative_to(root)}")


def demo_course(root):
    """build/demo/: a course of its own (gradebook, release record, submitted/) made from this one."""
    return copy_course_files(root, Path(root) / "build" / "demo", DEMO_FILES)


def build(root, jobs=2, with_slides=True):
    """The one-command demo: slides, then release, grade, feedback and report of the demo class."""
    root = Path(root).resolve()
    if with_slides:
        build_slides(root, root / "build" / "slides", root / "build" / "vendor" / "node_modules")
    demo_root = demo_course(root)
    step("演示课程 build/demo/：生成学生版并检查有无泄露")
    try:
        release_assignments(demo_root, assignments(demo_root))
    except release.ReleaseRefused:  # the assignments changed since the demo was graded: start the demo afresh
        shutil.rmtree(demo_root)
        demo_root = demo_course(root)
        release_assignments(demo_root, assignments(demo_root))
    demo.write_demo_class(demo_root, demo_root / "submitted", assignments(demo_root))
    print(f"\n（演示班级在 {(demo_root / 'submitted').relative_to(root)}，有自己的成绩库，不影响真实班级）")
    outcomes = grade(demo_root, jobs=jobs)
    step("反馈")
    publish_feedback(demo_root, outcomes)
    step("成绩与报告")
    write_report(demo_root, outcomes)
    return outcomes
