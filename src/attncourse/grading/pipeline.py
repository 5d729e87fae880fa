"""The instructor's main job: release, slides, autograde, feedback, grades CSV, report."""
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.converters import GenerateFeedback
from nbgrader.converters.base import NbGraderException

from .. import slides
from . import autograde, demo, logs, release, report
from .course import assignments, coursedir, nbgrader_config, submissions
from .files import replace_dir
from .variants import test_cell_ids


class ToolchainError(Exception):
    """The course's own tools failed (not a student's code)."""


def step(title):
    print(f"\n== {title} ==", flush=True)


def build_release(root, cfg):
    step("1/6 生成学生版 release/ 并检查有无泄露")
    for path in release.release_all(cfg, root, assignments(root)):
        print(f"  ✔ {path.relative_to(root)}")


def build_slides(root, out_dir, node_modules):
    step("2/6 运行讲义并生成离线幻灯片")
    out_dir.mkdir(parents=True, exist_ok=True)
    slides.copy_vendor(node_modules, out_dir)
    for deck in sorted((root / "notebooks").glob("*.ipynb")):
        nb, seconds = slides.execute(deck)
        target = slides.write_slides(nb, deck, out_dir)
        print(f"  ✔ {deck.name}: {seconds:.1f} s → {target.relative_to(root)}")


def publish_feedback(cfg, root, outcomes):
    """Each graded student's feedback, written to a scratch folder, checked for hidden-test lines with the
    release leak check, and only then published in feedback/. A failure or a leak stays on that student's row."""
    hidden = {a: set().union(*(release.secret_lines(nbformat.read(p, as_version=4), hidden_only=True)
                               for p in sorted((root / "source" / a).glob("*.ipynb"))))
              for a in {o.assignment for o in outcomes}}
    work = root / "build" / "grading"
    work.mkdir(parents=True, exist_ok=True)
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
            except Exception as exc:  # nbgrader logs the details; the build goes on for everyone else
                o.notes.append(f"反馈生成失败（{type(exc).__name__}，详见 build/nbgrader.log）")
                continue
            made = Path(scratch) / o.student / o.assignment
            leaked = [p.name for p in sorted(made.rglob("*")) if p.is_file()
                      and any(line in p.read_text(encoding="utf-8", errors="replace") for line in hidden[o.assignment])]
            if leaked:
                o.flags.append(f"反馈（{'、'.join(leaked)}）中出现了隐藏测试的内容，反馈已扣留")
                autograde.flag_after_grading(cfg, root, o)
                shutil.rmtree(root / "feedback" / o.student / o.assignment, ignore_errors=True)
                continue
            replace_dir(made, root / "feedback" / o.student / o.assignment, scratch)


def grade(root, class_dir, jobs, build_dir):
    """Steps 3 to 6 on one folder of submissions; returns the outcomes."""
    cfg = nbgrader_config(root, submitted=class_dir)
    pairs = submissions(class_dir, assignments(root))
    if not pairs:
        raise ToolchainError(f"{class_dir} 中没有找到提交（应为 <学生>/<作业>/*.ipynb）")
    step(f"3/6 自动评分 {len(pairs)} 份提交（{jobs} 个并行）")
    start = time.time()
    outcomes = autograde.grade_class(cfg, pairs, jobs=jobs)
    print(f"  用时 {time.time() - start:.1f} s")
    broken = [o for o in outcomes if o.status == "error"]
    if broken:
        raise ToolchainError("评分工具出错：" + "; ".join(f"{o.student}/{o.assignment}: {o.reason}" for o in broken))
    step("4/6 生成反馈 feedback/")
    publish_feedback(cfg, root, outcomes)
    step("5/6 导出成绩 CSV")
    csv_path = build_dir / "grades.csv"
    report.write_grades_csv(outcomes, csv_path)
    print(f"  ✔ {csv_path.relative_to(root)}")
    step("6/6 班级报告")
    cells = {aid: [cell for nb in sorted((root / "source" / aid).glob("*.ipynb"))
                   for cell in test_cell_ids(nbformat.read(nb, as_version=4))] for aid in assignments(root)}
    path = report.write_report(outcomes, build_dir / "report", cells)
    print(f"  ✔ {path.relative_to(root)}")
    return outcomes


def build(root, class_dir=None, jobs=2, with_slides=True):
    root = Path(root).resolve()
    if class_dir is not None and not Path(class_dir).is_dir():
        raise ToolchainError(f"找不到提交目录 {class_dir}（应为 <学生>/<作业>/*.ipynb 的结构，如 submitted）")
    build_dir = root / "build"
    build_dir.mkdir(exist_ok=True)
    log = logs.to_file(build_dir / "nbgrader.log")
    cfg = nbgrader_config(root)
    try:
        build_release(root, cfg)
    except NbGraderException as exc:
        raise ToolchainError(f"nbgrader generate_assignment 失败：\n{logs.tail(log)}") from exc
    if with_slides:
        build_slides(root, build_dir / "slides", build_dir / "vendor" / "node_modules")
    if class_dir is None:
        class_dir = demo.write_demo_class(root, build_dir / "demo_class", assignments(root))
        print(f"\n（未指定 --class：评分演示班级 {class_dir.relative_to(root)}）")
    class_dir = Path(class_dir).resolve()
    outcomes = grade(root, class_dir, jobs, build_dir)
    step("汇总")
    print(report.summary_table(outcomes))
    return outcomes
