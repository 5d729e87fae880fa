"""The autograded notebook as the TA reads it in formgrader, made before it is written to `autograded/`.

- Nothing the student wrote is active: the notebook is sanitized (`safe_html`).
- The student's own run is shown: the outputs of each code cell as submitted (kept, trimmed, by intake), after
  the grader's, marked as the student's run. Written answers refer to those numbers; the grader does not rerun
  the experiments.
- A submission held for review opens with a banner (for the TA only, never in feedback) naming each hold with
  the cell, the line and the line itself.
"""
import html

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell, new_output

from ..cells import TA_ONLY
from ..intake.reading import SUBMITTED_OUTPUTS
from ..model import SubmissionResult
from ..safe_html import sanitize_notebook

STUDENT_RUN = "—— 以下是学生提交时自己运行得到的输出（评分时没有重新运行，仅供阅读）——\n"


def show_student_outputs(nb) -> None:
    for cell in nb.cells:
        kept = cell.metadata.pop(SUBMITTED_OUTPUTS, None) if cell.cell_type == "code" else None
        if not kept:
            continue
        cell.outputs.append(new_output("stream", name="stdout", text=STUDENT_RUN))
        for item in kept:
            if "image/png" in item:
                cell.outputs.append(new_output("display_data", data={"image/png": item["image/png"],
                                                                     "text/plain": "<学生的图>"}))
            else:
                cell.outputs.append(new_output("stream", name="stdout", text=str(item.get("text/plain", ""))))


def banner(nb, result: SubmissionResult, assignment: str, student: str) -> NotebookNode:
    """A markdown cell for the TA listing the holds, each with the line it is about (escaped: inert)."""
    items = []
    for cell, line, text in result.review_lines:
        source = nb.cells[cell].source.splitlines() if 0 <= cell < len(nb.cells) else []
        quoted = source[line - 1] if 0 < line <= len(source) else ""
        items.append(f"<li>{html.escape(text)}" + (f"<pre>{html.escape(quoted[:300])}</pre>" if quoted else "")
                     + "</li>")
    held = "、".join(sorted(result.held)) or "无"
    body = (f"<h3>⚠ 待复核（只给助教看，不会出现在学生的反馈中）</h3>\n<p>暂不计分的测试单元格：{html.escape(held)}。"
            "这些写法可能影响评分程序，需要人看一眼：</p>\n<ul>\n" + "\n".join(items) + "\n</ul>\n"
            f"<p>复核：<code>course review {html.escape(assignment)} {html.escape(student)} --accept</code>（计入）"
            "或 <code>--reject</code>（记 0 分）；也可以在下面的测试单元格逐个给分。</p>")
    return new_markdown_cell(body, metadata={"tags": [TA_ONLY]})


def prepare(path, result: SubmissionResult, assignment: str, student: str) -> None:
    nb = nbformat.read(path, as_version=4)
    sanitize_notebook(nb)
    show_student_outputs(nb)
    if result.review_lines:
        nb.cells.insert(0, banner(nb, result, assignment, student))
    nbformat.write(nb, path)
