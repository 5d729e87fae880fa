"""Feedback a student can read offline: each test's result in Chinese, never the tests' source.

The preprocessors below and the template `templates/course_feedback` are set in `nbgrader_config.py`, so
plain `nbgrader generate_feedback` uses them too. nbgrader on its own prints hidden tests in full, in the
cell and again in the traceback (nbgrader #917), labels everything in English, shows an ungraded written
answer as 0 points, and loads MathJax from a CDN.

Hidden tests cannot appear by construction, so nothing scans the student's code for them: a page is made of
the released cells, the student's own cells with the outputs of the student's own run as submitted (the grader's
run of a student's code, which received the grader's reference code, is never shown), and, for each test cell,
what it checks (its docstring, which the student version shows) and the verdict's own message (no source, no
traceback). A test's message formats values, never a string the student's code returned (AUTHORING.md).
"""
import contextlib
import functools
import html
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import Preprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbconvert.writers.files import FilesWriter
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.api import Gradebook
from nbgrader.converters import GenerateFeedback
from nbgrader.preprocessors import GetGrades
from traitlets import Bool, Integer
from traitlets.config import Config

from .. import records, safe_html
from ..cells import SHOWN_RUN, TA_ONLY, is_test_cell
from ..course import Folders, coursedir, grading_dir
from ..files import replace_dir
from ..model import Outcome, Status
from ..syntax import docstring

TIMEOUT_NAMES = {"CellTimeoutError", "KeyboardInterrupt"}
MAX_PAGE_BYTES = 1 << 20  # a published page; one over it is made again showing less of the notebook's own cells
TEMPLATES = [str(Path(__file__).resolve().parents[2] / "templates")]  # holds course_feedback/
MATHJAX = "mathjax-tex-svg.js"  # MathJax 3's single-file build, linked beside each published page
# what `course feedback` hands the preprocessors in a page's resources: its gradebook session, and how many
# characters of the cells other than tests the page shows (HideTestSource.shown_chars, less for a page too big)
GRADEBOOK, SHOWN_CHARS = "course_gradebook", "course_shown_chars"


def verdict(outputs: list[NotebookNode]) -> tuple[bool, str]:
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


HELD, WITHHELD = "held", "withheld"  # a test cell's points wait for review / were withheld by it
REVIEW_VERDICTS = {HELD: "待复核：这个测试的分数等助教复核后才计入（见本页开头）",
                   WITHHELD: "复核后不计分：助教复核后没有计入这个测试的分数（原因见本页开头）"}
CODE_SPAN = re.compile(r"`([^`]+)`")


def _message_line(line: str) -> str:
    """A line of a failed test's message as HTML; the rows that `attncourse.checks.differences` indents by two
    spaces (位置 / 期望 / 实际) in a fixed-width font, so that their columns line up, and code between backticks
    (the hints' experiments to try) as code."""
    text = html.escape(line)
    if line.startswith("  "):
        return f'<span class="aligned">{text}</span>'
    return CODE_SPAN.sub(r"<code>\1</code>", text)


class FeedbackExporter(HTMLExporter):
    """The feedback pages' exporter (`c.GenerateFeedback.exporter_class`), configured as `c.FeedbackExporter`
    with the course's Chinese template: only feedback uses it, formgrader keeps nbgrader's own templates.
    `course feedback` uses one for all its pages: each distinct cell's code is highlighted once."""

    optimistic_validation = Bool(True, help="Validate the notebook once, after the last preprocessor, not after "
                                            "each (nbconvert's default)").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # mypy #16653: as in HideTestSource
        self.highlighters: dict[str | None, CachedHighlight] = {}

    def from_notebook_node(self, nb: NotebookNode, resources: dict[str, Any] | None = None,  # type: ignore[override]
                           **kw: Any) -> tuple[str, dict[str, Any]]:  # a page, as HTMLExporter's own
        """HTMLExporter's, but code is highlighted by a `CachedHighlight` kept for the exporter's life, and the page
        is not parsed with BeautifulSoup and written out again. HTMLExporter does that to give images without
        alt text nbconvert's words (`with_alt_text` does it here) and to make elements of JupyterLab's template
        focusable (the course's template, after the classic one, has none of them). The page is the one that
        pass writes, spelled as the template wrote it (tests/test_publish.py compares them)."""
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        if lexer not in self.highlighters:
            self.highlighters[lexer] = CachedHighlight(pygments_lexer=lexer, parent=self)
        highlight_code = self.filters.get("highlight_code", self.highlighters[lexer])
        # mypy #16653 (as in HideTestSource) for the calls of nbconvert's methods below
        resources = self._init_resources(resources)  # type: ignore[no-untyped-call]
        filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self,
                                                 resources=resources)
        self.register_filter("highlight_code", highlight_code)  # type: ignore[no-untyped-call]
        self.register_filter("filter_data_type", filter_data_type)  # type: ignore[no-untyped-call]
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return with_alt_text(page), resources


class CachedHighlight(Highlight2HTML):
    """nbconvert's highlighting of a cell's code, done once for each distinct cell (the instructor's cells are
    the same for every student). Of the cell's metadata, nbconvert reads `magics_language` only."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # mypy #16653: as in HideTestSource
        self.highlight = functools.lru_cache(maxsize=256)(self._highlight)

    def __call__(self, source: str, language: str | None = None, metadata: dict[str, Any] | None = None) -> str:
        return self.highlight(source, language, (metadata or {}).get("magics_language"))

    def _highlight(self, source: str, language: str | None, magics_language: str | None) -> str:
        metadata = {"magics_language": magics_language} if magics_language is not None else None
        highlighted: str = super().__call__(source, language, metadata)  # type: ignore[no-untyped-call]  # mypy #16653
        return highlighted


NO_ALT = "No description has been provided for this image"  # nbconvert's alt text
# an <img> start tag as html.parser reads it, whose quoted attribute values may hold ">" (the sanitizer, the
# markdown renderer and the templates quote every attribute value)
IMG_TAG = re.compile(r"""<img(?=[\t\n\r\f />])(?:"[^"]*"|'[^']*'|[^'">])*>""", re.IGNORECASE)


class _StartTag(HTMLParser):
    """The attribute names of one start tag, as html.parser (the parser of nbconvert's pass) reads them."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.attributes: set[str] = set()
        self.feed(tag)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attributes = {name for name, _ in attrs}


def with_alt_text(page: str) -> str:
    """`page` with nbconvert's alt text on each image that has none, as HTMLExporter's BeautifulSoup pass gives
    it."""
    def alt(match: re.Match[str]) -> str:
        tag = match.group(0)
        if "alt" in _StartTag(tag).attributes:
            return tag
        end = len(tag) - (2 if tag.endswith("/>") else 1)
        return f'{tag[:end]} alt="{NO_ALT}"{tag[end:]}'
    return IMG_TAG.sub(alt, page)


class HideTestSource(Preprocessor):
    """Replace each autograded test cell by what it checks and its verdict (a coloured word, no emoji: every
    CJK font has the characters), name each test in the summary by what it checks, drop the cells that are
    for the TA only (the review banner) and every output of the grader's run."""

    enabled = Bool(True, help="nbconvert preprocessors are off unless enabled").tag(config=True)
    shown_chars = Integer(200_000, help="Characters of the cells other than tests (their source and outputs) a page "
                                        "shows; the rest is cut with a note.").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        nb.cells = [c for c in nb.cells if TA_ONLY not in c.metadata.get("tags", [])]
        # mypy #16653: untyped_calls_exclude (nbconvert) misses calls through super()
        done: tuple[NotebookNode, dict[str, Any]] = super().preprocess(nb, resources)  # type: ignore[no-untyped-call]
        left = resources.get(SHOWN_CHARS, self.shown_chars)
        for cell in nb.cells:
            if not is_test_cell(cell):
                left = _shown(cell, left)
        return done

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any],
                        index: int) -> tuple[NotebookNode, dict[str, Any]]:
        if cell.cell_type == "code" and not is_test_cell(cell) and cell.metadata.get(SHOWN_RUN) != "student":
            cell.outputs = []
        if is_test_cell(cell):
            what = _docstring(cell.source)
            cell.metadata.nbgrader["what"] = what.splitlines()[0].rstrip("。") if what else ""
            cell.source = f'"""{what}"""' if what else "# （测试代码不予显示）"
            passed, text = verdict(cell.outputs)
            review = cell.metadata.nbgrader.get("review", "")
            if review:  # no 通过 beside points a review holds or withheld
                passed, text = False, REVIEW_VERDICTS[review]
            word, rest = text.split("：", 1) if "：" in text else (text, "")
            kind = review or ("pass" if passed else "fail")
            badge = f'<span class="verdict {kind}">{html.escape(word)}</span>'
            cell.outputs = [new_output("display_data", data={
                "text/html": badge + (" " + "<br>".join(map(_message_line, rest.splitlines())) if rest else ""),
                "text/plain": text})]  # a likely mistake (run/diagnosis.py) is the message's last line
        return cell, resources


_docstring = functools.lru_cache(maxsize=256)(docstring)  # a test cell is the same for every student


def _cut(text: str, left: int) -> str:
    return text if len(text) <= left else text[:max(left, 0)] + f"\n……（其余 {len(text) - max(left, 0)} 个字符未显示）\n"


def _shown(cell: NotebookNode, left: int) -> int:
    """Cut `cell`'s source and outputs to the `left` characters a page still shows, each cut with a note; returns
    what is left after it."""
    cell.source = _cut(cell.source, left)
    left -= len(cell.source)
    attachments = cell.get("attachments") or {}
    for name in list(attachments):
        size = sum(len(v) for v in attachments[name].values())
        if size > left:
            del attachments[name]
        else:
            left -= size
    if "attachments" in cell:
        safe_html.repair_pasted_images(cell, "未显示：本页已显示的内容达到上限")
    for output in cell.get("outputs", []):
        if "text" in output:
            output.text = _cut(output.text, left)
            left -= len(output.text)
        for mime, value in list(output.get("data", {}).items()):
            if not isinstance(value, str):
                continue
            if mime.startswith("image/") and len(value) > left:
                output.data = {"text/plain": f"（图片未显示：本页已显示的内容达到上限，其余 {len(value)} 个字符未显示）"}
                break
            output.data[mime] = _cut(value, left)
            left -= len(output.data[mime])
    return left


class GetGradesAndWaits(GetGrades):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's GetGrades, also marking points that wait for a person (a written answer not yet graded, or
    autograded points held for review) so that feedback says "waiting" instead of showing 0, marking the test
    cells whose points a review withheld, telling the template the outcome of the review (`outcome_note`) and where
    the page's MathJax file is (published beside it by `course feedback`). It reads the gradebook session that
    `course feedback` opens for all its pages (`resources[GRADEBOOK]`), else opens one for the page."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        self.record = records.read_record(self.config.CourseDirectory.root, info["assignment"], info["student"])
        shared = resources.get(GRADEBOOK)
        with contextlib.nullcontext(shared.value) if shared is not None else Gradebook(info["db_url"]) as self.gradebook:
            nb, resources = self._get_grades(nb, resources)
        waiting = [c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("waiting")]
        info["waiting"] = sum(meta["points"] for meta in waiting)
        info["score"] -= sum(meta["score"] or 0 for meta in waiting)
        resources["course_outcome"] = outcome_note(self.record)
        resources["course_mathjax"] = MATHJAX
        return nb, resources

    def _get_grades(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        """GetGrades.preprocess in `self.gradebook`, open already, reading the notebook's grades and comments in
        a query each instead of one for each cell."""
        info = resources["nbgrader"]
        notebook = self.gradebook.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
        self.grades = {grade.name: grade for grade in notebook.grades}
        self.comments = {comment.name: comment.comment for comment in notebook.comments}
        nb, resources = Preprocessor.preprocess(self, nb, resources)
        late_penalty = notebook.late_submission_penalty
        if late_penalty is None:
            late_penalty = 0
        else:
            self.log.warning("Late submission penalty: %s", late_penalty)
        info["score"] = notebook.score - late_penalty
        info["max_score"] = notebook.max_score
        info["late_penalty"] = late_penalty
        return nb, resources

    def _get_comment(self, cell: NotebookNode, resources: dict[str, Any]) -> None:
        """GetGrades._get_comment: the grader's comment on the answer."""
        cell.metadata.nbgrader["comment"] = self.comments[cell.metadata.nbgrader["grade_id"]]

    def _get_score(self, cell: NotebookNode, resources: dict[str, Any]) -> None:
        """GetGrades._get_score (the cell's score and points), with whether they wait and were reviewed."""
        meta = cell.metadata.nbgrader
        grade = self.grades[meta["grade_id"]]
        meta["score"], meta["points"] = grade.score, grade.max_score
        meta["waiting"] = bool(grade.needs_manual_grade and grade.manual_score is None)
        held = self.record is not None and meta["grade_id"] in self.record.held
        review = self.record.review if self.record is not None else None
        meta["review"] = ("" if not held else HELD if meta["waiting"] else
                          WITHHELD if review is not None and review.decision == Status.REJECTED else "")


def outcome_note(record: records.Record | None) -> dict[str, str]:
    """What the top of a page says about a review ({} when there was none to make): a title and the text, in
    the words every screen uses (model.Status), with the reasons the holds' kinds give."""
    if record is None or not record.held:
        return {}
    kinds = "；".join(dict.fromkeys(h.kind.reason for h in record.holds))
    where = "；".join(str(h) for h in record.holds if h.where)
    why = kinds + (f"。相关的代码：{where}" if where else "")
    review = record.review
    if review is None:
        return {"kind": "held", "title": Status.HELD.label,
                "text": f"{sum(record.held.values()):g} 分暂不计入，等助教复核：{why}。复核后这一页会更新。"}
    who = f"复核人 {review.by}，{review.at.replace('T', ' ')[:16]} UTC"
    note = f"助教的说明：{review.note}。" if review.note else ""
    texts = {Status.ACCEPTED: f"暂扣的 {review.points:g} 分已计入。{note}（{who}）",
             Status.REJECTED: f"{review.points:g} 分复核后不计入（下面标为“复核后不计分”的测试）。原因：{why}。{note}（{who}）",
             Status.REVIEWED: f"暂扣的测试由助教逐题给分，共 {review.points:g} 分。{note}（{who}）"}
    return {"kind": review.decision.value, "title": review.decision.label, "text": texts[review.decision]}


class SafeHTML(SanitizeHTML):
    """nbconvert's bleach-based sanitizer, on by default, with the course's settings (`safe_html`): a student's
    markdown or output cannot carry active content into feedback, nor imitate the course's verdict badges (this
    runs before `HideTestSource` adds them)."""

    enabled = Bool(True, help="nbconvert preprocessors are off unless enabled").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # mypy #16653: as in HideTestSource
        self.tags, self.attributes = safe_html.TAGS, safe_html.ATTRIBUTES
        self.sanitized = functools.lru_cache(maxsize=256)(super().sanitize_html_tags)

    def sanitize_html_tags(self, html_str: str) -> str:
        """nbconvert's, done once for each distinct text when `course feedback` uses this for all its pages (the
        instructor's markdown is the same for every student)."""
        sanitized: str = self.sanitized(html_str)
        return sanitized


# --- publishing ------------------------------------------------------------------------------------------------

def publish(cfg: Config, root: str | Path, outcomes: list[Outcome], say: Callable[[str], object] = print) -> int:
    """Each student's feedback, written to a scratch folder and then published in feedback/: the graded
    notebook's page, or, where there is no score (failed, not collected, missing, not graded yet), a page per
    released notebook that says so and why. One converter (`CourseFeedback`) makes every graded page. A failure
    stays on the student's row. Returns how many were published."""
    root, where = Path(root), Folders(cfg)
    work = grading_dir(root)
    work.mkdir(parents=True, exist_ok=True)
    mathjax = vendor_file(root, "mathjax3/es5/tex-svg.js")
    if mathjax is None:
        say("  ⚠ 找不到 MathJax 3（scripts/setup.sh 安装到 build/vendor）：反馈中的公式将显示为 TeX 源码")
    published = 0
    with Gradebook(cfg.CourseDirectory.db_url) as gradebook:
        pages = CourseFeedback(gradebook, coursedir=coursedir(cfg), config=cfg)
        for o in outcomes:
            with tempfile.TemporaryDirectory(dir=work, prefix="feedback-") as scratch:
                made = Path(scratch) / o.student / o.assignment
                try:
                    if o.status.has_score:
                        pages.generate(o, scratch, made)
                    else:
                        _no_score_pages(o, [p.stem for p in where.released_notebooks(o.assignment)], made)
                except Exception as exc:  # noqa: BLE001 - nbgrader logs the details; the others' feedback goes on
                    gradebook.db.rollback()  # the session stays usable after a database error
                    o.notes.append(f"反馈生成失败（{type(exc).__name__}，详见 build/nbgrader.log）")
                    continue
                if mathjax and o.status.has_score:
                    link_or_copy(mathjax, made / MATHJAX)
                replace_dir(made, where.feedback(o.student, o.assignment), scratch)
                published += 1
    return published


class CourseFeedback(GenerateFeedback):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's GenerateFeedback for every page of one `course feedback`: one exporter, so that its template
    is compiled once, and one gradebook session. Each page's resources hand the preprocessors the session
    (`GRADEBOOK`) and how many characters of the notebook's own cells to show (`SHOWN_CHARS`)."""

    def __init__(self, gradebook: Gradebook, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gradebook, self.force = gradebook, True
        self.shown_chars = self.page_chars = HideTestSource(config=self.config).shown_chars  # type: ignore[no-untyped-call]
        self.writer = FilesWriter(parent=self, config=self.config)
        self.exporter = self.exporter_class(parent=self, config=self.config)
        for pp in self.preprocessors:
            self.exporter.register_preprocessor(pp)

    def generate(self, o: Outcome, scratch: str, made: Path) -> None:
        """One student's feedback into `scratch`; a page over `MAX_PAGE_BYTES` is made again showing a quarter as
        much of the cells other than tests, down to none of them."""
        self.coursedir.assignment_id, self.coursedir.student_id = o.assignment, o.student
        self.coursedir.feedback_directory = scratch
        self.page_chars = self.shown_chars
        while True:
            self.start()
            if self.page_chars == 0 or max((p.stat().st_size for p in made.glob("*.html")), default=0) <= MAX_PAGE_BYTES:
                return
            self.page_chars = self.page_chars // 4 if self.page_chars >= 4096 else 0

    def start(self) -> None:
        """BaseConverter.start without making a new writer and exporter: they are made once, above."""
        self.init_notebooks()
        currdir = os.getcwd()
        os.chdir(self.coursedir.root)
        try:
            self.convert_notebooks()
        finally:
            os.chdir(currdir)

    def init_single_notebook_resources(self, notebook_filename: str) -> dict[str, Any]:
        resources: dict[str, Any] = super().init_single_notebook_resources(notebook_filename)
        resources[GRADEBOOK], resources[SHOWN_CHARS] = Shared(self.gradebook), self.page_chars
        return resources


class Shared:
    """A value that a page's resources hand on as it is: nbconvert deep-copies them before the preprocessors
    run."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, Any]) -> "Shared":
        return self


NO_SCORE_PAGE = """<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{notebook} · 作业反馈</title>
<style>
body {{ font-family: "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", sans-serif;
       max-width: 860px; margin: 2em auto; padding: 0 1em; color: #222; font-size: 16px; line-height: 1.6; }}
.outcome {{ border: 1px solid #e0c46c; background: #fff8e1; border-radius: 6px; padding: 0.8em 1.2em; }}
</style></head><body>
<h1>{notebook}（{assignment}）</h1>
<div class="outcome" id="course-outcome"><h2>{title}</h2><p>{reason}</p><p>{meaning}</p></div>
</body></html>
"""
NO_SCORE_MEANING = {
    Status.FAILED: "这次提交没有分数，不是 0 分：评分程序没能运行它（原因见上）。请修好后按课程要求重新提交，或联系助教。",
    Status.NOT_COLLECTED: "你在 LMS 上传的文件没能收进来评分，所以还没有分数（不是 0 分）。请把作业 notebook（.ipynb）"
                          "本身重新上传，或联系助教。",
    Status.MISSING: "课程没有收到你这份作业，所以这里没有分数（不是 0 分，如何计分由老师决定）。如果你已经提交，请联系助教。",
    Status.COLLECTED: "你的提交已经收到，还没有评分，所以这里还没有分数（不是 0 分）。评分后这一页会更新。",
}


def _no_score_pages(o: Outcome, notebooks: list[str], made: Path) -> None:
    """A page per released notebook for an outcome without a score: its status, the reason, what it means."""
    made.mkdir(parents=True)
    for notebook in notebooks:
        (made / f"{notebook}.html").write_text(NO_SCORE_PAGE.format(
            notebook=html.escape(notebook), assignment=html.escape(o.assignment), title=o.status.label,
            reason=html.escape(o.reason), meaning=NO_SCORE_MEANING[o.status]), encoding="utf-8")


def vendor_file(root: str | Path, name: str) -> Path | None:
    """A file of the npm packages setup.sh installs in build/vendor/, here or in a course folder above."""
    for folder in (Path(root).resolve(), *Path(root).resolve().parents):
        path = folder / "build" / "vendor" / "node_modules" / name
        if path.is_file():
            return path
    return None


def link_or_copy(src: str | Path, dest: str | Path) -> None:
    """A hard link (the same file for every student's page costs no space), or a copy across file systems."""
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)
