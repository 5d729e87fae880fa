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
import copy
import html
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat import NotebookNode
from nbformat.v4 import new_output
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
    with the course's Chinese template: only feedback uses it, formgrader keeps nbgrader's own templates."""


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
        left = self.shown_chars
        for cell in nb.cells:
            if not is_test_cell(cell):
                left = _shown(cell, left)
        return done

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any],
                        index: int) -> tuple[NotebookNode, dict[str, Any]]:
        if cell.cell_type == "code" and not is_test_cell(cell) and cell.metadata.get(SHOWN_RUN) != "student":
            cell.outputs = []
        if is_test_cell(cell):
            what = docstring(cell.source)
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
    the page's MathJax file is (published beside it by `course feedback`)."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        self.record = records.read_record(self.config.CourseDirectory.root, info["assignment"], info["student"])
        nb, resources = super().preprocess(nb, resources)
        waiting = [c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("waiting")]
        resources["nbgrader"]["waiting"] = sum(meta["points"] for meta in waiting)
        resources["nbgrader"]["score"] -= sum(meta["score"] or 0 for meta in waiting)
        resources["course_outcome"] = outcome_note(self.record)
        resources["course_mathjax"] = MATHJAX
        return nb, resources

    def _get_score(self, cell: NotebookNode, resources: dict[str, Any]) -> None:
        super()._get_score(cell, resources)
        meta = cell.metadata.nbgrader
        grade = self.gradebook.find_grade(meta["grade_id"], self.notebook_id, self.assignment_id, self.student_id)
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


# --- publishing ------------------------------------------------------------------------------------------------

def publish(cfg: Config, root: str | Path, outcomes: list[Outcome], say: Callable[[str], object] = print) -> int:
    """Each student's feedback, written to a scratch folder and then published in feedback/: the graded
    notebook's page, or, where there is no score (failed, not collected, missing, not graded yet), a page per
    released notebook that says so and why. A failure stays on the student's row. Returns how many were
    published."""
    root, where = Path(root), Folders(cfg)
    work = grading_dir(root)
    work.mkdir(parents=True, exist_ok=True)
    mathjax = vendor_file(root, "mathjax3/es5/tex-svg.js")
    if mathjax is None:
        say("  ⚠ 找不到 MathJax 3（scripts/setup.sh 安装到 build/vendor）：反馈中的公式将显示为 TeX 源码")
    published = 0
    for o in outcomes:
        with tempfile.TemporaryDirectory(dir=work, prefix="feedback-") as scratch:
            made = Path(scratch) / o.student / o.assignment
            try:
                if o.status.has_score:
                    _generate(cfg, o, scratch, made)
                else:
                    _no_score_pages(o, [p.stem for p in where.released_notebooks(o.assignment)], made)
            except Exception as exc:  # noqa: BLE001 - nbgrader logs the details; the others' feedback goes on
                o.notes.append(f"反馈生成失败（{type(exc).__name__}，详见 build/nbgrader.log）")
                continue
            if mathjax and o.status.has_score:
                link_or_copy(mathjax, made / MATHJAX)
            replace_dir(made, where.feedback(o.student, o.assignment), scratch)
            published += 1
    return published


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


def _generate(cfg: Config, o: Outcome, scratch: str, made: Path) -> None:
    """One student's feedback into `scratch`; a page over `MAX_PAGE_BYTES` is made again showing a quarter as much
    of the cells other than tests, down to none of them."""
    shown = HideTestSource(config=cfg).shown_chars  # type: ignore[no-untyped-call]  # mypy #16653, as above
    while True:
        cfg = copy.deepcopy(cfg)
        cfg.HideTestSource.shown_chars = shown
        cd = coursedir(cfg, o.assignment, o.student)
        cd.feedback_directory = scratch
        converter = GenerateFeedback(coursedir=cd, config=cfg)
        converter.force = True
        converter.start()
        if shown == 0 or max((p.stat().st_size for p in made.glob("*.html")), default=0) <= MAX_PAGE_BYTES:
            return
        shown = shown // 4 if shown >= 4096 else 0


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
