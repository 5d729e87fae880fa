"""The demo class, and `course build`'s demo course that grades it with the semester's commands.

The demo students are synthetic and exercise every path of the grading pipeline. They are built from
`source/` and `release/` and the unit's catalog at grading time, so they always match the current
assignments. Files are rewritten only when their content changes, so re-running the demo keeps earlier
grades (the grader keeps the grade of a submission whose staged copy did not change).
"""
import copy
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from ...notebooks import dumps
from .. import commands
from ..catalogs import load_catalog
from ..cells import is_test_cell
from ..course import assignments, build_dir, copy_course_files, folders
from ..model import Outcome
from ..release.student_version import ReleaseRefused
from .variants import answered

TIMESTAMP = "2026-11-20 09:00:00.000000 UTC"
CRASH = "import os\nos._exit(1)  # 演示：内核崩溃\n"
LOOP = ("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)  # 演示：忽略 Ctrl-C 的死循环\n"
        "while True:\n    pass\n")
# (student id, what the student did)
STUDENTS = [
    ("demo_full", "满分：参考答案"),
    ("demo_lecturer", "讲师本人的 d2l 风格代码"),
    ("demo_partial", "部分错误：目录中的前两个错误"),
    ("demo_untouched", "未作答：原样提交学生版"),
    ("demo_deleted_test", "满分答案，但删掉了一个测试单元格"),
    ("demo_crash", "提交的代码调用 os._exit，内核崩溃"),
    ("demo_loop", "忽略 Ctrl-C 的死循环"),
    ("demo_corrupt", "损坏的 .ipynb 文件"),
    ("demo_tamper", "未作答，却把 torch 的比较函数改成永远通过"),
]
TAMPER = ("import torch\n"
          "torch.allclose = lambda *args, **kwargs: True  # 演示：篡改评分\n"
          "torch.testing.assert_close = lambda *args, **kwargs: None\n")


def _two_bugs_in_different_cells(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chosen: list[dict[str, Any]] = []
    used: set[str] = set()
    for v in variants:
        cells = set(v.get("cells", {})) | set(v.get("edits", {}))
        if not v.get("needs_cuda") and not cells & used:
            chosen.append(v)
            used |= cells
        if len(chosen) == 2:
            break
    return chosen


def _first_solution_cell(nb: NotebookNode) -> NotebookNode:
    cell: NotebookNode = next(c for c in nb.cells
                              if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code")
    return cell


def demo_notebooks(root: str | os.PathLike[str], assignment: str) -> tuple[str, dict[str, str]]:
    """{student: notebook text} for one assignment."""
    root = Path(root)
    catalog = load_catalog(root, assignment)
    name = f"{catalog.NOTEBOOK}.ipynb"
    where = folders(root)
    source = nbformat.read(where.source(assignment) / name, as_version=4)
    release = nbformat.read(where.release(assignment) / name, as_version=4)
    full = answered(release, source)
    partial_cells: dict[str, str] = {}
    partial_edits: dict[str, list[tuple[str, str]]] = {}
    for bug in _two_bugs_in_different_cells(catalog.VARIANTS):
        partial_cells.update(bug.get("cells", {}))
        for gid, pairs in bug.get("edits", {}).items():
            partial_edits.setdefault(gid, []).extend(pairs)
    crash, loop, deleted = (copy.deepcopy(full) for _ in range(3))
    tamper = copy.deepcopy(release)
    _first_solution_cell(crash).source = CRASH + _first_solution_cell(crash).source
    _first_solution_cell(loop).source = LOOP + _first_solution_cell(loop).source
    _first_solution_cell(tamper).source = TAMPER + _first_solution_cell(tamper).source
    tests = [c for c in deleted.cells if is_test_cell(c)]
    deleted.cells.remove(tests[-1])
    notebooks = {
        "demo_full": full,
        "demo_lecturer": answered(release, source, replace_cells=catalog.LECTURER),
        "demo_partial": answered(release, source, partial_cells, partial_edits),
        "demo_untouched": release,
        "demo_deleted_test": deleted,
        "demo_crash": crash,
        "demo_loop": loop,
        "demo_tamper": tamper,
    }
    texts = {student: dumps(nb) for student, nb in notebooks.items()}
    texts["demo_corrupt"] = dumps(full)[: len(dumps(full)) // 2]  # cut off mid-file
    return name, texts


def write_demo_class(root: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                     assignment_ids: Iterable[str]) -> Path:
    """Write `<out_dir>/<student>/<assignment>/` for every demo student; returns out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_if_changed(out_dir / "README.md", "# 演示班级（由 course build 生成）\n\n" + "".join(
        f"- `{student}`：{what}\n" for student, what in STUDENTS))
    for aid in assignment_ids:
        name, texts = demo_notebooks(root, aid)
        for student, text in texts.items():
            folder = out_dir / student / aid
            folder.mkdir(parents=True, exist_ok=True)
            _write_if_changed(folder / name, text)
            _write_if_changed(folder / "timestamp.txt", TIMESTAMP)
    return out_dir


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def demo_course(root: str | os.PathLike[str]) -> Path:
    """build/demo/: a course of its own (gradebook, release record, submitted/) made from this one."""
    demo: Path = copy_course_files(root, build_dir(root) / "demo")
    return demo


def build(root: str | os.PathLike[str], jobs: int = 2) -> list[Outcome]:
    """Release, grade, feedback and report of the demo class in build/demo/; returns the Outcomes."""
    root = Path(root).resolve()
    demo_root = demo_course(root)
    commands.step("演示课程 build/demo/：生成学生版并检查有无泄露")
    try:
        commands.release_assignments(demo_root, assignments(demo_root))
    except ReleaseRefused:  # the assignments changed since the demo was graded: start the demo afresh
        shutil.rmtree(demo_root)
        demo_root = demo_course(root)
        commands.release_assignments(demo_root, assignments(demo_root))
    submitted = folders(demo_root).submitted()
    write_demo_class(demo_root, submitted, assignments(demo_root))
    print(f"\n（演示班级在 {submitted.relative_to(root)}，有自己的成绩库，不影响真实班级）")
    outcomes = commands.grade(demo_root, jobs=jobs)
    everyone = commands.class_outcomes(demo_root)
    commands.step("反馈")
    commands.publish_feedback(demo_root, everyone)
    commands.step("成绩与报告")
    commands.write_report(demo_root, everyone)
    return outcomes
