"""Validate for students, in Chinese: nbgrader's validation, reported per question.

nbgrader's own report lists every failed test cell with its whole source and traceback, in English, and never
says what passed. `CourseValidator` runs the same validation (nbgrader's `Validator`: its checks and its kernel
run) and reports first the counts in one line (`headline`), then one line per question, 通过 / 未通过 / 未作答,
and under a failed question the message of each failed visible test in one or two lines. A question whose answer
is still the released stub (untouched, or raising NotImplementedError in its own code when a test runs it) is
未作答, counted apart and without error lines. Tracebacks are kept apart (`details`), shown only when asked for:
`nbgrader validate --CourseValidator.details=True x.ipynb`, or unfolded in the Validate dialog.

Two ways in, both set up by `python -m attncourse.student`:
- `nbgrader validate`: the environment's nbgrader_config.py calls `use_in_nbgrader()`, which makes nbgrader's
  validate command build a CourseValidator (nbgrader has no setting for the validator's class).
- JupyterLab's Validate button: the course's own button (labextension/attncourse-validate) posts to this
  module's server extension, which answers with the same report; the dialog keeps the headline in view and
  scrolls the list under it.
"""
import json
import os
import re
from typing import Any, cast

from nbconvert.filters import strip_ansi
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.validator import Validator
from traitlets import Bool

PASSED, FAILED, UNANSWERED = "通过", "未通过", "未作答"
MARK = {PASSED: "✔", FAILED: "✘", UNANSWERED: "○"}
HEADING = re.compile(r"^##\s+(.+)$", re.M)
MESSAGE_LINES = 2  # lines of a failed test's message in the summary
MESSAGE_WIDTH = 160  # characters of each line
FRAME = re.compile(r"Cell In ?\[(\d+)\]|File ")  # a traceback's frame (IPython 8): a notebook cell's, or a file's


def questions(nb: NotebookNode) -> list[dict[str, Any]]:
    """[{"title", "answers": [cells], "tests": [cells], "written": bool}] in the notebook's order: a question is the
    answer cells (nbgrader solution cells) under one `## ` heading with the test cells after them."""
    found: list[dict[str, Any]] = []
    title = None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and not utils.is_solution(cell):
            title = (HEADING.findall(cell.source) or [title])[0]
        elif utils.is_solution(cell):
            name = title or cell.metadata.nbgrader.get("grade_id", "")
            if not found or found[-1]["title"] != name:
                found.append({"title": name, "answers": [], "tests": [], "written": cell.cell_type == "markdown"})
            found[-1]["answers"].append(cell)
            if utils.is_grade(cell):
                found[-1]["tests"].append(cell)
        elif utils.is_grade(cell) and found:
            found[-1]["tests"].append(cell)
    return found


def _error(cell: NotebookNode) -> Any:
    """The first error or stderr output of an executed code cell, or None."""
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            return output
        if output.output_type == "stream" and output.name == "stderr":
            return {"ename": "stderr", "evalue": output.text, "traceback": [output.text]}
    return None


def _stub(error: Any, answers: dict[int, str]) -> str | None:
    """The answer cell (its grade_id) whose own code raised `error`, a NotImplementedError: a stub not yet written.
    `answers`: {execution count: grade_id} of the notebook's answer cells. None for any other error, and for a
    NotImplementedError raised elsewhere (torch raises one for a module without `forward`: a real mistake)."""
    if not error or error["ename"] != "NotImplementedError":
        return None
    frames = [m for m in (FRAME.match(strip_ansi(entry)) for entry in error.get("traceback", [])) if m]
    return answers.get(int(frames[-1].group(1))) if frames and frames[-1].group(1) else None


def untouched(cell: NotebookNode) -> bool:
    """An answer cell as it was released: nbgrader's checksum of it still matches the one released with it."""
    return bool(cell.metadata.nbgrader.get("checksum") == utils.compute_checksum(cell))


def _short(error: Any) -> str:
    """An error's message in at most MESSAGE_LINES lines of MESSAGE_WIDTH characters, no traceback."""
    name, value = error["ename"], strip_ansi(error["evalue"]).strip()
    lines = [line for line in (value.splitlines() or [""]) if line.strip()][:MESSAGE_LINES] or [""]
    text = [(f"{name}: " if name not in ("AssertionError", "stderr") or not value else "") + lines[0], *lines[1:]]
    return "\n".join(line if len(line) <= MESSAGE_WIDTH else line[:MESSAGE_WIDTH - 1] + "…" for line in text)


def answer_counts(nb: NotebookNode) -> dict[int, str]:
    """{execution count: grade_id} of the executed notebook's answer code cells."""
    return {cell.execution_count: cell.metadata.nbgrader["grade_id"] for cell in nb.cells
            if cell.cell_type == "code" and utils.is_solution(cell) and cell.get("execution_count")}


def verdict(question: dict[str, Any], answers: dict[int, str]) -> tuple[str, list[str]]:
    """(通过 / 未通过 / 未作答, [one- or two-line messages of what failed]) of an executed question. A question
    whose every code answer is still a stub (as released, or raising NotImplementedError in its own code) is
    未作答, whatever its tests say; under a failed question a stub is named once, never as its tests' errors."""
    if question["written"]:
        score, _ = utils.determine_grade(question["answers"][0])
        return (UNANSWERED, []) if score == 0 else ("已作答（人工评分，这里不检查）", [])
    code = [cell for cell in question["answers"] if cell.cell_type == "code"]
    errors = {cell.metadata.nbgrader["grade_id"]: _error(cell) for cell in code}
    test_errors = {test.metadata.nbgrader["grade_id"]: _error(test) for test in question["tests"]
                   if test.cell_type == "code"}
    if not any(errors.values()) and not any(test_errors.values()):
        return PASSED, []
    stubs = {_stub(error, answers) for error in [*errors.values(), *test_errors.values()]}
    not_done = [cell.metadata.nbgrader["grade_id"] for cell in code
                if untouched(cell) or cell.metadata.nbgrader["grade_id"] in stubs]
    if len(not_done) == len(code):
        return UNANSWERED, []
    messages = [f"{name}：还没有作答" for name in not_done]
    for name, error in [*errors.items(), *test_errors.items()]:
        stub = _stub(error, answers)
        if not error or name in not_done or stub in not_done:
            continue
        if stub:  # another question's answer, not yet written
            messages.append(f"{name}：它用到的 {stub} 还没有作答")
        else:
            messages.append(f"{name}：{'你的代码运行出错：' if name in errors else ''}{_short(error)}")
    return FAILED, messages


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def summary(nb: NotebookNode) -> tuple[str, str]:
    """(the counts in one line, one line per question with what failed under it) of an executed notebook."""
    found = questions(nb)
    if not found:
        return "这个 notebook 里没有要作答的题目。", ""
    answers = answer_counts(nb)
    results = [(q, *verdict(q, answers)) for q in found]
    counts = {word: sum(r[1] == word for r in results) for word in (PASSED, FAILED, UNANSWERED)}
    headline = f"共 {len(results)} 题：通过 {counts[PASSED]}，未通过 {counts[FAILED]}，未作答 {counts[UNANSWERED]}。"
    lines = []
    for question, word, messages in results:
        lines.append(f"{MARK.get(word, '·')} {word}：{question['title']}")
        lines += [indent(message) for message in messages]
    if counts[PASSED] == sum(not q["written"] for q in found):
        lines += ["", "所有自动检查的题目都通过了可见测试。"]
    lines += ["", "这里只运行可见测试；评分时还有隐藏测试，通过可见测试不等于满分。"]
    return headline, "\n".join(lines)


def tracebacks(nb: NotebookNode) -> str:
    """The full traceback of every error in the questions that failed (what nbgrader shows), for those who ask;
    a stub's NotImplementedError says nothing more than 还没有作答 and is left out."""
    parts, answers = [], answer_counts(nb)
    for question in questions(nb):
        if verdict(question, answers)[0] != FAILED:
            continue
        for cell in question["answers"] + question["tests"]:
            error = _error(cell) if cell.cell_type == "code" else None
            if error and not _stub(error, answers):
                parts.append(f"—— {cell.metadata.nbgrader.get('grade_id', '')} ——\n"
                             + strip_ansi("\n".join(error["traceback"])))
    return "\n\n".join(parts)


class CourseValidator(Validator):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's Validator with the course's Chinese report."""

    details = Bool(False, help="Also print the full traceback of every failed test.").tag(config=True)

    executed: NotebookNode | None = None  # the notebook as the last validation ran it

    def _preprocess(self, nb: NotebookNode) -> NotebookNode:
        executed: NotebookNode = super()._preprocess(nb)
        self.executed = executed
        return executed

    def report(self, filename: str) -> dict[str, str]:
        """{"headline": the counts in one line, "summary": one line per question and what failed under it,
        "details": tracebacks ("" when none)} of a notebook, validated by nbgrader."""
        self.executed = None
        results = self.validate(filename)
        executed = cast("NotebookNode | None", self.executed)  # set by `_preprocess` while nbgrader validated
        assert executed is not None
        if results.get("type_changed"):
            kinds = "；".join(f"{c['source'].splitlines()[0][:60] if c['source'] else '(空)'}："
                             f"{c['old_type']} → {c['new_type']}" for c in results["type_changed"])
            return {"headline": f"有 {len(results['type_changed'])} 个单元格的类型被改了，评分时会出错。",
                    "summary": f"请改回原来的类型（或重新下载作业）：{kinds}", "details": ""}
        headline, text = summary(executed)
        if results.get("changed"):
            text = (f"注意：有 {len(results['changed'])} 个带锁的单元格或测试单元格被改动过。评分时用的是原样的测试，"
                    "你的改动不算数，现在通过的测试评分时可能不通过。\n\n" + text)
        return {"headline": headline, "summary": text, "details": tracebacks(executed)}

    def validate_and_print(self, filename: str) -> None:
        result = self.report(filename)
        self.stream.write(f"{result['headline']}\n\n{result['summary']}\n")
        if self.details and result["details"]:
            self.stream.write("\n详细信息（traceback）：\n\n" + result["details"] + "\n")
        elif result["details"]:
            self.stream.write("（要看完整的 traceback：nbgrader validate --CourseValidator.details=True <notebook>）\n")
        self.stream.flush()


def use_in_nbgrader() -> None:
    """Make `nbgrader validate` validate with CourseValidator. nbgrader's ValidateApp.start builds its module's
    `Validator` (tests/test_internals.py watches that code)."""
    from nbgrader.apps import validateapp
    validateapp.Validator = CourseValidator


def _load_jupyter_server_extension(server_app: Any) -> None:
    """The server side of the course's Validate button: POST attncourse/validate {"path"} → the report."""
    from jupyter_server.base.handlers import APIHandler
    from jupyter_server.utils import url_path_join
    from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler
    from tornado.web import HTTPError, authenticated

    class ValidateHandler(APIHandler, ValidateAssignmentHandler):  # type: ignore[misc]  # no type information
        @authenticated  # type: ignore[untyped-decorator]  # tornado is not read by mypy (pyproject.toml)
        def post(self) -> None:
            root = os.path.realpath(server_app.root_dir)
            target = os.path.realpath(os.path.join(root, self.get_json_body()["path"]))
            if os.path.commonpath([root, target]) != root or not target.endswith(".ipynb"):
                raise HTTPError(403, "只能验证 JupyterLab 工作目录中的 notebook")
            validator = CourseValidator(config=self.load_config())  # nbgrader's config, as its own Validate reads it
            self.finish(json.dumps(validator.report(target), ensure_ascii=False))

    base = server_app.web_app.settings["base_url"]
    server_app.web_app.add_handlers(".*$", [(url_path_join(base, "attncourse", "validate"), ValidateHandler)])


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "attncourse.validate"}]
