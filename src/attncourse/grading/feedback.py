"""Feedback that tells each test's result in Chinese and never shows the tests' source.

`HideTestSource` is listed in `GenerateFeedback.preprocessors` in `nbgrader_config.py`, so plain
`nbgrader generate_feedback` uses it too. nbgrader on its own prints hidden tests in full, in the cell
and again in the traceback (nbgrader #917).
"""
import ast

from bleach import ALLOWED_ATTRIBUTES, ALLOWED_TAGS
from nbconvert.preprocessors import Preprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat.v4 import new_output
from traitlets import Bool

from .integrity import parse

TIMEOUT_NAMES = {"CellTimeoutError", "KeyboardInterrupt"}


def docstring(source):
    """The leading string literal of a test cell ('' if there is none or it does not parse)."""
    try:
        return ast.get_docstring(parse(source)) or ""
    except SyntaxError:
        return ""


def verdict(outputs):
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        return "✅ 通过"
    err = errors[-1]
    if err.get("ename") in TIMEOUT_NAMES:
        return "❌ 未通过：运行超时，代码可能陷入了死循环或过慢"
    message = (err.get("evalue") or "").strip()
    if err.get("ename") == "NotImplementedError":
        return "❌ 未通过：仍有未完成的函数（NotImplementedError）"
    if err.get("ename") == "AssertionError":
        return f"❌ 未通过：{message or '结果与预期不符'}"
    return f"❌ 未通过：{err.get('ename')}: {message}"


class HideTestSource(Preprocessor):
    """Replace each autograded test cell by what it checks and a one-line result."""

    enabled = Bool(True, help="nbconvert preprocessors are off unless enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            what = docstring(cell.source)
            cell.source = f'"""{what}"""' if what else "# （测试代码不予显示）"
            cell.outputs = [new_output("stream", name="stdout", text=verdict(cell.outputs) + "\n")]
        return cell, resources


class SafeHTML(SanitizeHTML):
    """nbconvert's bleach-based sanitizer, on by default, allowing the plain tags the course's own cells use.

    A student's markdown or output cannot carry `<script>`, event handlers, SVG or JavaScript into feedback.
    """

    enabled = Bool(True, help="nbconvert preprocessors are off unless enabled").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tags = sorted(set(ALLOWED_TAGS) | {"div", "span", "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6",
                                                 "table", "thead", "tbody", "tr", "th", "td", "pre", "sup", "sub"})
        self.attributes = {**ALLOWED_ATTRIBUTES, "div": ["class"], "span": ["class"]}
