"""The autograded notebook as the TA reads it in formgrader, made before it is written to `autograded/`.

- Nothing the student wrote is active: the notebook is sanitized (`safe_html`).
- One run per cell, labelled with which run it is: a code cell the student ran shows the student's own outputs
  as submitted (kept, trimmed, by intake), the numbers the written answers cite; a cell the student did not run
  shows what the grader's run printed. Test cells show their verdict.
- A submission held for review opens with a banner (for the TA only, never in feedback) naming each hold with
  the cell, the line and the line itself (`review_banner`); formgrader redraws it once a person has decided.
"""
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_output

from ..cells import SHOWN_RUN, is_test_cell
from ..intake.reading import SUBMITTED_OUTPUTS
from ..model import SubmissionResult
from ..review_banner import banner
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


def prepare(path: str | Path, result: SubmissionResult, assignment: str, student: str, when: str) -> None:
    nb = nbformat.read(path, as_version=4)
    sanitize_notebook(nb)
    show_one_run(nb, when)
    if result.holds:
        nb.cells.insert(0, banner(nb, result.holds, sorted(result.held), assignment, student))
    nbformat.write(nb, path)
