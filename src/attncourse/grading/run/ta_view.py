"""The autograded notebook as the TA reads it in formgrader, made before it is written to `autograded/`.

- Nothing the student wrote is active: the notebook is sanitized (`safe_html`).
- One run per cell, labelled with which run it is: a code cell the student ran shows the student's own outputs
  as submitted (kept, trimmed, by intake), the numbers the written answers cite; a cell the student did not run
  shows what the grader's run printed. Test cells show their verdict.
- A submission held for review opens with a banner (for the TA only, never in feedback) naming each hold with
  the cell, the line and the line itself; formgrader redraws it once a person has decided (`show_review`).
"""
import html
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell, new_output

from ..cells import HOLD_BANNER, SHOWN_RUN, TA_ONLY, is_test_cell
from ..intake.reading import SUBMITTED_OUTPUTS
from ..model import Hold, Outcome, Review, Status, SubmissionResult
from ..safe_html import sanitize_notebook

STUDENT_RUN = "—— 学生提交前自己运行得到的输出（{when}）：书面题引用的是这些数字 ——\n"
GRADER_RUN = "—— 评分时运行这个单元格得到的输出（学生提交的 notebook 中这里没有输出）——\n"


def show_one_run(nb: NotebookNode, when: str) -> None:
    """Each code cell that is not a test shows one run, labelled: the student's own outputs where the student ran
    it (`when`: the submission's time), else the grader's."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = cell.metadata.pop(SUBMITTED_OUTPUTS, None)
        if is_test_cell(cell):
            continue
        cell.metadata[SHOWN_RUN] = "student" if kept else "grader"
        if not kept:
            if cell.outputs:
                cell.outputs.insert(0, new_output("stream", name="stdout", text=GRADER_RUN))
            continue
        cell.outputs = [new_output("stream", name="stdout", text=STUDENT_RUN.format(when=when))]
        for item in kept:
            if "image/png" in item:
                cell.outputs.append(new_output("display_data", data={"image/png": item["image/png"],
                                                                     "text/plain": "<学生的图>"}))
            else:
                cell.outputs.append(new_output("stream", name="stdout", text=str(item.get("text/plain", ""))))


def banner(nb: NotebookNode, holds: list[Hold], held: list[str], assignment: str, student: str,
           review: Review | None = None) -> NotebookNode:
    """A markdown cell for the TA: the holds, each with why and the line it is about (escaped: inert), and either
    how to decide or the decision (`review`). formgrader redraws it as the decision stands (`show_review`);
    feedback never shows it."""
    items = []
    for hold in holds:
        source = nb.cells[hold.cell].source.splitlines() if 0 <= hold.cell < len(nb.cells) else []
        quoted = source[hold.line - 1] if 0 < hold.line <= len(source) else ""
        items.append(f"<li>{html.escape(str(hold))}<br><small>{html.escape(hold.kind.reason)}</small>"
                     + (f"<pre>{html.escape(quoted[:300])}</pre>" if quoted else "") + "</li>")
    cells = html.escape("、".join(sorted(held)) or "无")
    reasons = "\n<ul>\n" + "\n".join(items) + "\n</ul>\n"
    if review is None:
        body = (f"<h3>⚠ 待复核（只给助教看，不会出现在学生的反馈中）</h3>\n<p>暂不计分的测试单元格：{cells}。"
                "这些写法可能影响评分程序，需要人看一眼：</p>" + reasons +
                "<p>复核：在下面的“复核这份提交”中点“计入”或“不计入”并写明理由，或 "
                f"<code>course review {html.escape(assignment)} {html.escape(student)} --accept</code>（计入）"
                "或 <code>--reject</code>（不计入）；也可以在这些测试单元格中逐题给分。复核人和时间都会记录。</p>")
    else:
        mark = "✘" if review.decision == Status.REJECTED else "✔"
        body = (f"<h3>{mark} 已复核：{html.escape(review.describe())}</h3>\n"
                + (f"<p>理由（学生在反馈中看到）：{html.escape(review.note)}</p>\n" if review.note else "")
                + f"<p>复核前暂不计分的测试单元格：{cells}；当时的原因（只给助教看）：</p>" + reasons)
    note: NotebookNode = new_markdown_cell(body, metadata={"tags": [TA_ONLY, HOLD_BANNER]})
    return note


def show_review(nb: NotebookNode, outcome: Outcome) -> None:
    """The banner of an autograded notebook as `outcome`'s review stands (formgrader draws the page from this)."""
    nb.cells = [c for c in nb.cells if HOLD_BANNER not in c.metadata.get("tags", [])]
    if outcome.holds:
        nb.cells.insert(0, banner(nb, outcome.holds, outcome.held_cells, outcome.assignment, outcome.student,
                                  outcome.review))


def prepare(path: str | Path, result: SubmissionResult, assignment: str, student: str, when: str) -> None:
    nb = nbformat.read(path, as_version=4)
    sanitize_notebook(nb)
    show_one_run(nb, when)
    if result.holds:
        nb.cells.insert(0, banner(nb, result.holds, sorted(result.held), assignment, student))
    nbformat.write(nb, path)
