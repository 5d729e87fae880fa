"""Feedback a student can read offline: each test's result in Chinese, never the tests' source.

The preprocessors below and the template `templates/course_feedback` are set in `nbgrader_config.py`, so
plain `nbgrader generate_feedback` uses them too. nbgrader on its own prints hidden tests in full, in the
cell and again in the traceback (nbgrader #917), labels everything in English, shows an ungraded written
answer as 0 points, and loads MathJax from a CDN.
"""
import ast
import html
from pathlib import Path

from bleach import ALLOWED_ATTRIBUTES, ALLOWED_TAGS
from nbconvert.preprocessors import Preprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat.v4 import new_output
from nbgrader.preprocessors import GetGrades
from traitlets import Bool

from .integrity import parse

TIMEOUT_NAMES = {"CellTimeoutError", "KeyboardInterrupt"}
TEMPLATES = [str(Path(__file__).resolve().parent.parent / "templates")]  # holds course_feedback/
MATHJAX = "mathjax-tex-svg.js"  # MathJax 3's single-file build, linked beside each published page


def docstring(source):
    """The leading string literal of a test cell ('' if there is none or it does not parse)."""
    try:
        return ast.get_docstring(parse(source)) or ""
    except SyntaxError:
        return ""


def verdict(outputs):
    """(passed, the Chinese verdict) of a test cell from its outputs."""
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        return True, "通过"
    err = errors[-1]
    if err.get("ename") in TIMEOUT_NAMES:
        return False, "未通过：运行超时，代码可能陷入了死循环或过慢"
    message = (err.get("evalue") or "").strip()
    if err.get("ename") == "NotImplementedError":
        return False, "未通过：仍有未完成的函数（NotImplementedError）"
    if err.get("ename") == "AssertionError":
        return False, f"未通过：{message or '结果与预期不符'}"
    return False, f"未通过：{err.get('ename')}: {message}"


class HideTestSource(Preprocessor):
    """Replace each autograded test cell by what it checks and its verdict (a coloured word, no emoji: every
    CJK font has the characters)."""

    enabled = Bool(True, help="nbconvert preprocessors are off unless enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            what = docstring(cell.source)
            cell.source = f'"""{what}"""' if what else "# （测试代码不予显示）"
            passed, text = verdict(cell.outputs)
            word, rest = text.split("：", 1) if "：" in text else (text, "")
            badge = f'<span class="verdict {"pass" if passed else "fail"}">{html.escape(word)}</span>'
            cell.outputs = [new_output("display_data", data={
                "text/html": badge + (f" {html.escape(rest)}" if rest else ""), "text/plain": text})]
        return cell, resources


class GetGradesAndWaits(GetGrades):
    """nbgrader's GetGrades, also marking points that wait for a person (a written answer not yet graded, or
    autograded points held for review) so that feedback says "waiting" instead of showing 0, and telling the
    template where the page's MathJax file is (published beside it by `course feedback`)."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        waiting = [c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("waiting")]
        resources["nbgrader"]["waiting"] = sum(meta["points"] for meta in waiting)
        resources["nbgrader"]["score"] -= sum(meta["score"] or 0 for meta in waiting)
        resources["course_mathjax"] = MATHJAX
        return nb, resources

    def _get_score(self, cell, resources):
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"], self.notebook_id,
                                          self.assignment_id, self.student_id)
        cell.metadata.nbgrader["waiting"] = bool(grade.needs_manual_grade and grade.manual_score is None)


class SafeHTML(SanitizeHTML):
    """nbconvert's bleach-based sanitizer, on by default, allowing the plain tags the course's own cells use.

    A student's markdown or output cannot carry `<script>`, event handlers, SVG or JavaScript into feedback.
    """

    enabled = Bool(True, help="nbconvert preprocessors are off unless enabled").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tags = sorted(set(ALLOWED_TAGS) | {"div", "span", "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6",
                                                 "table", "thead", "tbody", "tr", "th", "td", "pre", "sup", "sub"})
        self.attributes = {**ALLOWED_ATTRIBUTES, "div": ["class"], "span": ["class"]}  # .verdict, .course-title
