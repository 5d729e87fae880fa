"""The review banner of a held submission's autograded notebook, for the TA only (never in feedback): each hold
with why, its cell and line, and either how to decide or the decision. The run stage puts it in
(run/ta_view.py); formgrader draws it again as the decision stands (publish/formgrader)."""
import html

from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell

from .cells import HOLD_BANNER, TA_ONLY
from .model import Hold, Outcome, Review, Status


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
