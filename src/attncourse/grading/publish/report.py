"""The class report: grades CSV, score histograms, pass rate per test cell, and one row per student and
assignment with its outcome (model.Status) in the words every output uses."""
import csv
import io
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import mistune

from ..files import write_atomic
from ..model import Outcome, Status
from ..text import for_csv, for_markdown, for_terminal

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMNS = ["assignment", "student", "name", "status", "status_label", "score", "max_score", "pending_manual",
           "withheld_for_review", "reason", "review", "review_decision", "reviewed_by", "reviewed_at", "review_note",
           "notes"]


def write_grades_csv(outcomes: Iterable[Outcome], path: str | Path) -> None:
    """One row per student and assignment, `status` one of model.Status and `status_label` its Chinese words. Only a
    submission with points has a score: a failed, not collected, missing or not yet graded one has none, only its
    `reason` (never a silent 0).

    `score` counts neither written answers waiting for a TA (`pending_manual`) nor autograded points held
    back until a person has reviewed the holds in `review` (`withheld_for_review`); a person's decision on them is
    `review_decision` (accepted, rejected or reviewed), `reviewed_by`, `reviewed_at` and `review_note`."""
    buffer = io.StringIO()
    w = csv.writer(buffer)
    w.writerow(COLUMNS)
    for o in outcomes:
        ok, r = o.status.has_score, o.review
        w.writerow([o.assignment, for_csv(o.student), for_csv(o.name), o.status, o.status.label,
                    f"{o.score:g}" if ok else "", f"{o.max_score:g}" if ok else "", f"{o.pending:g}" if ok else "",
                    f"{o.withheld:g}" if ok else "", for_csv(o.reason), for_csv("；".join(o.flags), 2000),
                    r.decision if r else "", for_csv(r.by) if r else "", r.at if r else "",
                    for_csv(r.note) if r else "", for_csv("；".join(o.notes), 2000)])
    write_atomic(path, "\ufeff" + buffer.getvalue())  # BOM: Excel opens Chinese correctly


MISCONCEPTION_COLUMNS = ["student", "assignment", "question", "misconception", "label"]


def write_misconceptions_csv(outcomes: Iterable[Outcome], path: str | Path) -> None:
    """One row per (student, assignment, failed test cell) whose likely mistake the grader named (see
    run/diagnosis.py): the catalog's misconception id and its Chinese label."""
    buffer = io.StringIO()
    w = csv.writer(buffer)
    w.writerow(MISCONCEPTION_COLUMNS)
    for o in outcomes:
        if o.status.has_score:
            for cell, found in sorted(o.diagnoses.items()):
                w.writerow([for_csv(o.student), o.assignment, cell, found.get("id", ""), found.get("label", "")])
    write_atomic(path, "\ufeff" + buffer.getvalue())


def misconception_counts(items: Iterable[Outcome]) -> list[tuple[str, int]]:
    """[(label, students)] of an assignment's graded submissions, most students first: each student counts once
    per misconception, however many of its tests failed."""
    students: defaultdict[str, set[str]] = defaultdict(set)
    for o in items:
        if o.status.has_score:
            for found in o.diagnoses.values():
                students[found.get("label", "")].add(o.student)
    return sorted(((label, len(who)) for label, who in students.items()), key=lambda x: (-x[1], x[0]))


def _figure(figsize: tuple[float, float]) -> "Figure":
    """A figure in the course's style. matplotlib is imported here, when `course report` draws: the other
    commands that use this module's text (`course grade`'s lines) start without it."""
    from matplotlib.figure import Figure

    from ...plotting import use_course_style
    use_course_style()
    return Figure(figsize=figsize, layout="tight")


def _histogram(scores: list[float], maximum: float, title: str, path: Path) -> None:
    from matplotlib.ticker import MaxNLocator
    fig = _figure((6, 3.2))
    ax = fig.subplots()
    bins = max(5, min(20, int(maximum) + 1))
    ax.hist(scores, bins=bins, range=(0, maximum), color="#c0392b", edgecolor="white")
    ax.set(xlabel="得分", ylabel="人数", title=title)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.savefig(path, dpi=120)


def _pass_rates(rates: dict[str, float], title: str, path: Path) -> None:
    names = list(rates)
    fig = _figure((6.5, 0.35 * len(names) + 1.2))
    ax = fig.subplots()
    ax.barh(names, [rates[n] * 100 for n in names], color="#2c7fb8")
    ax.invert_yaxis()
    ax.set(xlim=(0, 100), xlabel="满分通过率（%）", title=title)
    fig.savefig(path, dpi=120)


def held_text(o: Outcome) -> str:
    """The autograded score of a submission with points held for review, in the words every screen uses:
    "26/28，其中 26 分待复核"."""
    assert o.score is not None  # points are held only of a graded submission
    return f"{o.score + o.withheld:g}/{o.max_score:g}，其中 {o.withheld:g} 分待复核"


def score_text(o: Outcome) -> str:
    """The score as every screen shows it: points, the held points named, or a dash where there is no score."""
    if not o.status.has_score:
        return "—"
    return held_text(o) if o.status == Status.HELD else f"{o.score:g} / {o.max_score:g}"


def why(o: Outcome) -> str:
    """What a person should know about an outcome, in one line: the reason there is no score, the holds, the
    decision and its note."""
    if o.reason:
        return o.reason
    decided = f"（{o.review.describe()}" + (f"：{o.review.note}" if o.review.note else "") + "）" if o.review else ""
    return "；".join(o.flags) + decided


def _student_rows(items: list[Outcome], out_dir: Path, feedback_dir: str | Path | None) -> list[str]:
    """The per-student table of one assignment: status, score, pending, the link to the feedback, and last (the
    only column that wraps) the reason, the holds or the decision."""
    rows = ["| 学号 | 姓名 | 状态 | 得分 | 待人工评分 | 反馈 | 说明 |", "|---|---|---|---|---|---|---|"]
    for o in sorted(items, key=lambda o: o.student):
        pages = sorted((Path(feedback_dir) / o.student / o.assignment).glob("*.html")) if feedback_dir else []
        link = " ".join(f"[{for_markdown(p.stem)}](<{os.path.relpath(p, out_dir)}>)" for p in pages) or "—"
        pending = f"{o.pending:g}" if o.status.has_score else "—"
        rows.append(f"| {for_markdown(o.student)} | {for_markdown(o.name) or '—'} | {o.status.label} | {score_text(o)} "
                    f"| {pending} | {link} | {for_markdown(why(o), 300) or '—'} |")
    return rows + [""]


NO_SCORE = (Status.FAILED, Status.NOT_COLLECTED, Status.MISSING, Status.COLLECTED)


def write_report(outcomes: Iterable[Outcome], out_dir: str | Path, test_cells: dict[str, list[str]],
                 feedback_dir: str | Path | None = None) -> Path:
    """`report.md` and `report.html` (opens in a browser) with PNG plots in `out_dir`; `test_cells` maps
    assignment -> test grade_ids; `feedback_dir` holds the published feedback the student table links to.
    Returns the Markdown file's path. What came from students is escaped (`text.for_markdown`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_assignment: defaultdict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_assignment[o.assignment].append(o)
    counted_as = [Status.HELD, *NO_SCORE]
    lines = ["# 班级评分报告", "", "| 作业 | 学生 | 有成绩 | " + " | ".join(s.label for s in counted_as)
             + " | 平均分 | 中位数 | 满分 |", "|---" * (len(counted_as) + 6) + "|"]
    sections = []
    for aid, items in sorted(by_assignment.items()):
        graded = [o for o in items if o.status.has_score]
        # a grade is settled once nothing waits for review: only settled grades go into the statistics
        settled = [o for o in items if o.status.is_grade]
        scores = sorted(o.score for o in settled if o.score is not None)  # every graded one has a score
        count = {status: sum(o.status == status for o in items) for status in counted_as}
        maximum = (graded[0].max_score or 0.0) if graded else 0
        mean = f"{sum(scores) / len(scores):.1f}" if scores else "—"
        median = f"{statistics.median(scores):g}" if scores else "—"
        lines.append(f"| {aid} | {len(items)} | {len(settled)} | " + " | ".join(str(count[s]) for s in counted_as)
                     + f" | {mean} | {median} | {maximum:g} |")
        sec = [f"## {aid}", ""]
        if graded:
            waiting = count[Status.HELD]
            title = f"{aid}：得分分布（{len(scores)} 份" + (f"；{waiting} 份待复核，不计入）" if waiting else "）")
            _histogram(scores, maximum, title, out_dir / f"{aid}-scores.png")
            sec += [f"![{aid} 得分分布]({aid}-scores.png)", ""]
            rates = {}
            for cell in test_cells.get(aid, []) if settled else []:
                full = [o for o in settled if cell in o.cells and o.cells[cell][0] >= o.cells[cell][1] > 0]
                rates[cell] = len(full) / len(settled)
            if rates:
                _pass_rates(rates, f"{aid}：各测试单元格通过率", out_dir / f"{aid}-tests.png")
                sec += [f"![{aid} 各测试通过率]({aid}-tests.png)", "", "| 测试单元格 | 满分通过率 |", "|---|---|"]
                sec += [f"| `{c}` | {r * 100:.0f}% |" for c, r in rates.items()]
                sec.append("")
        common = misconception_counts(items)
        if common:
            sec += ["### 常见错误（按学生人数排序，下次课可以重讲）", "",
                    "失败的测试与某个已编目的错误给出完全相同的结果时，评分程序才认定这个原因；每名学生每种错误只计一次。"
                    "明细见 `build/misconceptions.csv`。", "", "| 可能的错误 | 学生人数 |", "|---|---|"]
            sec += [f"| {for_markdown(label)} | {count} |" for label, count in common]
            sec.append("")
        sec += ["### 每名学生", ""] + _student_rows(items, out_dir, feedback_dir)
        held = [o for o in items if o.status == Status.HELD]
        if held:
            sec += ["### 待复核的提交（自动评分的分数在复核前不计入）", "",
                    "| 学号 | 姓名 | 自动评分 | 原因 |", "|---|---|---|---|"]
            sec += [f"| {for_markdown(o.student)} | {for_markdown(o.name) or '—'} | {held_text(o)} | "
                    f"{for_markdown('；'.join(o.flags), 2000)} |" for o in held]
            sec += ["", "在 formgrader 中打开提交，可以看到每条原因所在的行，并点“计入”或“不计入”（写明理由）；"
                    "也可以运行 `course review <作业> <学生> --accept`（计入）或 `--reject`（不计入）。", ""]
        decided = [(o, r) for o in items if (r := o.review)]
        if decided:
            sec += ["### 已复核的提交", "", "| 学号 | 姓名 | 决定 | 复核人 | 时间（UTC） | 复核的原因 | 复核说明 |",
                    "|---|---|---|---|---|---|---|"]
            sec += [f"| {for_markdown(o.student)} | {for_markdown(o.name) or '—'} | "
                    f"{r.decision.label}（{r.points:g} 分） | {for_markdown(r.by)} | {r.at.replace('T', ' ')[:16]} | "
                    f"{for_markdown('；'.join(r.flags), 2000)} | {for_markdown(r.note) or '—'} |" for o, r in decided]
            sec.append("")
        noted = [o for o in items if o.notes]
        if noted:
            sec += ["### 评分时的说明", "", "| 学生 | 说明 |", "|---|---|"]
            sec += [f"| {for_markdown(o.student)} | {for_markdown('；'.join(o.notes), 2000)} |" for o in noted]
            sec.append("")
        unscored = [o for o in items if o.status in NO_SCORE]
        if unscored:
            sec += ["### 没有成绩的学生（不是 0 分：导出成绩时留空）", "", "| 学号 | 姓名 | 状态 | 原因 |", "|---|---|---|---|"]
            sec += [f"| {for_markdown(o.student)} | {for_markdown(o.name) or '—'} | {o.status.label} | "
                    f"{for_markdown(o.reason)} |" for o in sorted(unscored, key=lambda o: (o.status, o.student))]
            sec.append("")
        sections += sec
    text = "\n".join(lines + [""] + sections) + "\n"
    write_atomic(out_dir / "report.md", text)
    write_atomic(out_dir / "report.html", HTML_PAGE.format(body=mistune.create_markdown(plugins=["table"])(text)))
    return out_dir / "report.md"


HTML_PAGE = """<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>班级评分报告</title>
<style>
body {{ font-family: "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif; max-width: 1200px;
       margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: left; vertical-align: top; white-space: nowrap; }}
th:last-child, td:last-child {{ white-space: normal; min-width: 16em; overflow-wrap: anywhere; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; }}
code {{ background: #f6f6f6; padding: 0 3px; }}
</style></head><body>
{body}
</body></html>
"""


def summary_table(outcomes: Iterable[Outcome]) -> str:
    rows = [f"{'作业':14s} {'学生':18s} {'状态':10s} {'得分':>9s} {'待人工':>6s}  原因 / 复核"]
    for o in outcomes:
        ok = o.status.has_score
        score = f"{o.score + o.withheld:g}/{o.max_score:g}" if ok and o.score is not None else "—"
        pending = f"{o.pending:g}" if ok and o.pending else ""
        note = f"⚠ 其中 {o.withheld:g} 分待复核：" + "；".join(o.flags) if o.status == Status.HELD else why(o)
        rows.append(f"{o.assignment:14s} {for_terminal(o.student, 64):18s} {o.status.label:10s} "
                    f"{score:>9s} {pending:>6s}  {for_terminal(note)}")
    return "\n".join(rows)


def describe(o: Outcome) -> str:
    """One line of `course grade`'s progress for a finished submission."""
    head = f"{o.assignment:14s} {for_terminal(o.student, 64):18s}"
    if o.status.has_score:
        mark = "＝" if o.kept else "⚠" if o.status == Status.HELD else "✔"
        score = held_text(o) if o.status == Status.HELD else f"{o.score:g}/{o.max_score:g}"
        manual = f"（{o.pending:g} 分待人工评分）" if o.pending else ""
        held = f"  待复核：{for_terminal('；'.join(o.flags))}" if o.status == Status.HELD else ""
        return f"{head} {mark} {score}{manual}  ({o.seconds:.1f} s){held}"
    return f"{head} ✘ {o.status.label}：{for_terminal(o.reason)}  ({o.seconds:.1f} s)"
