"""The instructor's steps over a semester, as the `course` commands run them.

A real class lives in the course folder: `course release` → students work → `course collect` → `course grade`
→ formgrader for the written answers → `course feedback`, `course report`, `course export`. Grading always
uses what was released (the tests stored in the gradebook), never regenerates, and keeps manual grades.
Each command prints what it did; `ToolchainError` is for failures of the tools or of the instructor's input,
never of a student's code.
"""
import difflib
import time
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook
from nbgrader.apps import ExportApp
from nbgrader.converters.base import NbGraderException
from tqdm import tqdm
from traitlets.config import Config

from . import logs, records
from .cells import test_cell_ids
from .course import Folders, assignments, build_dir, folders, nbgrader_config, submissions
from .intake import collect, staging
from .isolation import preload
from .isolation.sandbox import SandboxUnavailable
from .model import Outcome, Status
from .publish import feedback, report
from .release import student_version as release
from .text import for_terminal


class ToolchainError(Exception):
    """The course's own tools failed, or the instructor's input cannot be used (not a student's code)."""


def step(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def _log(root: str | Path) -> Path:
    build_dir(root).mkdir(exist_ok=True)
    return logs.to_file(build_dir(root) / "nbgrader.log")


# --- release ---------------------------------------------------------------------------------------------------

def release_assignments(root: str | Path, ids: list[str] | None, force: bool = False) -> None:
    root = Path(root)
    log = _log(root)
    cfg = nbgrader_config(root)
    for aid in ids or assignments(root):
        try:
            for path in release.release(cfg, root, aid, force=force):
                print(f"  ✔ {path.relative_to(root)}")
        except NbGraderException as exc:
            raise ToolchainError(f"nbgrader generate_assignment 失败：\n{logs.tail(log)}") from exc


def released_ids(root: str | Path, ids: list[str] | None = None) -> list[str]:
    """The assignments to work on: those asked for, which must have been released, or every released one."""
    done = release.record(root)
    if not ids:
        return sorted(done)
    missing = [a for a in ids if a not in done]
    if missing:
        raise ToolchainError("\n".join(_unknown(root, a, sorted(done)) for a in missing))
    return list(ids)


def _unknown(root: str | Path, assignment: str, released: list[str]) -> str:
    """Why `assignment` cannot be worked on: written but not released, or no such assignment (with the released
    ones and the nearest name)."""
    if assignment in assignments(root):
        return f"{assignment} 尚未发布：先运行 course release {assignment} / not released yet"
    near = difflib.get_close_matches(assignment, released + assignments(root), n=1, cutoff=0.5)
    return (f"没有作业 {assignment} / no such assignment。已发布的作业：{'、'.join(released) or '（还没有）'}"
            + (f"。是不是 {near[0]}？" if near else ""))


# --- collect ---------------------------------------------------------------------------------------------------

def collect_download(root: str | Path, source: str | Path, assignment: str) -> collect.Collected:
    root = Path(root)
    [assignment] = released_ids(root, [assignment])
    where = folders(root)
    names = [p.name for p in where.released_notebooks(assignment)]
    others = {p.name: p.parent.name for p in sorted(where.release().glob("*/*.ipynb")) if p.parent.name != assignment}
    result = collect.collect(nbgrader_config(root), root, Path(source), assignment, names, others)
    for student, notebook, when, name in result.taken:
        print(f"  ✔ {student}/{assignment}/{notebook} ← {for_terminal(name)}（{when:%Y-%m-%d %H:%M} UTC）")
    for line in result.notes:
        print(f"  ＝ {for_terminal(line, 2000)}")
    if result.refused:  # the students first: each has a row saying so in every output
        print(f"  ⚠ {len(result.refused)} 名学生的上传没能收进来评分（成绩表中记为“未能收取”，不是 0 分）：")
        for student, why in result.refused.items():
            print(f"      {for_terminal(student, 64)}：{for_terminal(why)}")
    for student, files in result.extra.items():
        print(f"  ⚠ {for_terminal(student, 64)} 另有 {len(files)} 个文件没有收取：{for_terminal('、'.join(files), 300)}")
    for why, count, examples in collect.grouped(result.unmatched):
        more = f" 等 {count} 个" if count > len(examples) else ""
        print(f"  ✘ 未收集 {count} 个：{why}：{for_terminal('、'.join(examples), 400)}{more}")
    if result.unmatched:
        listing = build_dir(root) / f"collect-{assignment}-未收集.txt"
        collect.write_listing(listing, result.unmatched)
        print(f"  未收集的每个文件及原因：{listing.relative_to(root)}")
    print(f"  收集 {len({t[0] for t in result.taken})} 名学生；{len(result.refused)} 名学生未能收取；"
          f"{len(result.unmatched)} 个文件未能收集")
    return result


# --- grade, feedback, report, export ---------------------------------------------------------------------------

def grade(root: str | Path, ids: list[str] | None = None, student: str | None = None, jobs: int = 2,
          class_dir: str | Path | None = None, cluster: str | None = None) -> list[Outcome]:
    """Grade submitted/ (after importing `class_dir`, a folder laid out as <student>/<assignment>/), here or on
    the Dask cluster whose scheduler is at `cluster` (default: `c.Cluster.address`, '' for here)."""
    root = Path(root)
    _log(root)
    ids = released_ids(root, ids)
    cfg = nbgrader_config(root)
    if not (cfg.Cluster.get("address", "") if cluster is None else cluster):
        preload.start_early()  # a local run: its preloading process imports while the class is read
    if class_dir is not None:
        for line in collect.import_class(cfg, root, Path(class_dir), ids):
            print(f"  ＝ {line}")
    for aid in ids:
        for note in release.changes_since_release(root, aid) or []:
            print(f"  ⚠ {note}：评分仍按发布时存入成绩库的测试进行（重新发布：course release {aid} --force）")
    submitted = Folders(cfg).submitted()
    pairs = [p for p in submissions(submitted, ids) if student is None or p[1] == student] if submitted.is_dir() else []
    if not pairs:
        raise ToolchainError(f"{submitted} 中没有找到 {'、'.join(ids)} 的提交" + (f"（学生 {student}）" if student else ""))
    from .run.cluster import Cluster, ClusterLost  # torch and Dask: imported by the commands that grade only
    cluster = Cluster(config=cfg).address if cluster is None else cluster
    step(f"自动评分 {len(pairs)} 份提交（" + (f"Dask 集群 {cluster}）" if cluster else f"{jobs} 个并行）"))
    start = time.time()
    bar = tqdm(total=len(pairs), unit="份", desc="评分", disable=None, leave=False, dynamic_ncols=True)

    def progress(done: int, total: int, outcome: Outcome) -> None:
        elapsed = time.time() - start
        remaining = elapsed / done * (total - done)
        tqdm.write(f"[{done}/{total} · 已用 {tqdm.format_interval(elapsed)} · 预计还需 "
                   f"{tqdm.format_interval(remaining)}] {report.describe(outcome)}")
        bar.update()

    try:
        outcomes = grade_submissions(cfg, pairs, jobs=jobs, force=student is not None, progress=progress,
                                     cluster=cluster)
    except SandboxUnavailable as exc:
        raise ToolchainError(str(exc)) from exc
    except ClusterLost as exc:
        graded = exc.graded
        if graded is None:
            raise ToolchainError(f"{exc}。未评分任何提交 / nothing was graded") from exc
        raise ToolchainError(f"{exc}。评分已停止：本次评完的 {graded} 份提交已记录；集群恢复后再次运行 course grade，"
                             f"只评尚未评分的提交 / grading stopped, {graded} graded submissions are kept; "
                             f"run course grade again once the cluster is back") from exc
    finally:
        bar.close()
    print(f"  用时 {time.time() - start:.1f} s")
    broken = [o for o in outcomes if o.status == Status.ERROR]
    if broken:
        raise ToolchainError("评分工具出错：" + "; ".join(f"{o.student}/{o.assignment}: {o.reason}" for o in broken))
    step("汇总")
    print(report.summary_table(outcomes))
    return outcomes


def grade_submissions(cfg: Config, pairs: list[tuple[str, str]], **options: Any) -> list[Outcome]:
    """Stage the submissions `pairs` [(assignment, student)] of the class folder (intake), then grade them (run);
    `options` as `autograde.grade_class` takes them."""
    from .run import autograde
    if options.get("preload", True) and not options.get("cluster"):
        preload.start_early()  # its imports overlap the staging
    with staging.class_staged(cfg, pairs) as intakes:
        return autograde.grade_class(cfg, intakes, **options)


def class_outcomes(root: str | Path, ids: list[str] | None = None) -> list[Outcome]:
    """One Outcome per student and assignment (records.class_outcomes), read back from the records and the
    gradebook, for every student the gradebook (the roster) names."""
    root = Path(root)
    cfg = nbgrader_config(root)
    with Gradebook(cfg.CourseDirectory.db_url) as gb:
        return records.class_outcomes(gb, root, released_ids(root, ids), _graded_pairs(root, ids))


def publish_feedback(root: str | Path, outcomes: list[Outcome]) -> None:
    root = Path(root)
    _log(root)
    published = feedback.publish(nbgrader_config(root), root, outcomes)
    print(f"  ✔ feedback/：{published} 份反馈")


def write_report(root: str | Path, outcomes: list[Outcome], out_dir: str | Path | None = None) -> None:
    root = Path(root)
    out = Path(out_dir or build_dir(root))
    csv_path = out / "grades.csv"
    report.write_grades_csv(outcomes, csv_path)
    print(f"  ✔ {csv_path.relative_to(root)}")
    report.write_misconceptions_csv(outcomes, out / "misconceptions.csv")
    print(f"  ✔ {(out / 'misconceptions.csv').relative_to(root)}")
    where = folders(root)
    cells = {aid: [cell for nb in where.released_notebooks(aid)
                   for cell in test_cell_ids(nbformat.read(nb, as_version=4))] for aid in {o.assignment for o in outcomes}}
    path = report.write_report(outcomes, out / "report", cells, where.feedback())
    print(f"  ✔ {path.relative_to(root)}，{path.with_suffix('.html').relative_to(root)}")


def export_grades(root: str | Path, to: str | Path) -> None:
    """nbgrader's export with the course's plugin (`c.ExportApp.plugin_class`): the LMS CSV."""
    root = Path(root)
    _log(root)
    app = ExportApp()
    app.initialize([], root=str(root))
    app.update_config(Config({"ExportPlugin": {"to": str(to)}}))
    app.start()
    print(f"  ✔ {to}")
    held = records.waiting(class_outcomes(root))
    if held:
        print(f"  ⚠ {len(held)} 份提交共 {sum(w.points for w in held):g} 分待复核，表中记为“待复核”：course review")


def _graded_pairs(root: str | Path, ids: list[str] | None = None) -> list[tuple[str, str]]:
    submitted = folders(root).submitted()
    return submissions(submitted, released_ids(root, ids)) if submitted.is_dir() else []


def review_holds(root: str | Path, assignment: str | None = None, student: str | None = None,
                 accept: bool | None = None, by: str = "", note: str = "") -> None:
    """List the submissions with points held for review, or decide on one (`accept` True or False), signed with
    the reviewer's name (`by`, else `c.Reviewer.name`, else this machine's user: records.reviewer)."""
    root = Path(root)
    cfg = nbgrader_config(root)
    if accept is None:
        held = [w for w in records.waiting(class_outcomes(root, [assignment] if assignment else None))
                if student in (None, w.student)]
        for w in held:
            print(f"  {w.assignment:14s} {w.student:18s} {w.points:g} 分待复核")
            for flag in w.flags:
                print(f"      {for_terminal(flag)}")
        print(f"  共 {len(held)} 份待复核" + ("：course review <作业> <学生> --accept（计入）或 --reject（不计入），"
                                          "--note 写明理由（学生会在反馈中看到）" if held else ""))
        return
    if not (assignment and student):
        raise ToolchainError("复核需要作业和学生：course review <作业> <学生> --accept 或 --reject")
    [assignment] = released_ids(root, [assignment])
    name = records.reviewer(cfg, by)
    points = records.decide(cfg.CourseDirectory.db_url, root, assignment, student, accept, name, note)
    print(f"  ✔ {student} 的 {assignment}：{points:g} 分{'计入' if accept else '不计入'}（复核人 {for_terminal(name)}，"
          "时间已记录）")
