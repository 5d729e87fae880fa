"""formgrader as the course uses it: a Jupyter server extension, enabled by scripts/setup.sh beside nbgrader's.

- A score a TA enters for a cell held for review is the TA's decision: once no held cell waits, it is recorded
  with who and when (`records.formgrader_graded`), as `course review` records its own.
- Math renders from the course's own MathJax 2 (build/vendor, installed by setup.sh): no page asks a CDN.
- Manage Assignments shows what `course release` released (released.json) and the course's steps, without the
  exchange warning (the course does not use nbgrader's exchange). The buttons that would go around the course's
  checks (new assignment, generate, release, collect, autograde, generate and release feedback: formgrader's
  feedback would replace the course's and drop the MathJax beside each page) are not shown, and their API
  answers with the course command to use instead.

nbgrader 0.9.6's formgrader handlers are patched in place when this extension loads; tests/test_internals.py
fingerprints each method relied on.
"""
import functools
import getpass
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader
from jupyter_server.utils import url_path_join
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.server_extensions.formgrader import apihandlers, handlers
from tornado.web import RequestHandler, StaticFileHandler, authenticated

from .. import records
from ..release.student_version import record as released
from .feedback import vendor_file

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "formgrader"
# nbconvert's `mathjax()` macro, which nbgrader's formgrade template calls without a URL
CDN_MATHJAX = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"
LOCAL_MATHJAX = "attncourse/mathjax/"
REFUSED = {  # API handler: the course's step instead
    apihandlers.AssignHandler: "course release <作业>",
    apihandlers.ReleaseHandler: "course release <作业>，再用 course bundle <作业> 打包发给学生",
    apihandlers.UnReleaseHandler: "course release <作业> --force（已有提交时说明影响）",
    apihandlers.CollectHandler: "course collect <LMS 下载的 zip> --assignment <作业>",
    apihandlers.AutogradeHandler: "course grade <作业> --student <学号>",
    apihandlers.GenerateAllFeedbackHandler: "course feedback <作业>",
    apihandlers.GenerateFeedbackHandler: "course feedback <作业>",
    apihandlers.ReleaseAllFeedbackHandler: "course feedback <作业>（反馈在 feedback/ 中，经 LMS 发给学生）",
    apihandlers.ReleaseFeedbackHandler: "course feedback <作业>（反馈在 feedback/ 中，经 LMS 发给学生）",
}
# Manage Submissions: the Autograde, Generate Feedback and Release Feedback columns
HIDE_SUBMISSION_BUTTONS = ("<style>table.table tr > :nth-child(n+6) { display: none; }</style>"
                           '<p class="alert alert-info" id="course-steps">重新评分与反馈用课程命令：'
                           "<code>course grade</code>、<code>course feedback</code>（见 README）。</p>")


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _user(handler: RequestHandler) -> str:
    """Who entered the score: the server's user where it knows one (JupyterHub), else this machine's user (a
    token-only server names every visitor "anonymous-…")."""
    name = str(getattr(handler.current_user, "username", "") or "")
    return getpass.getuser() if not name or name.lower().startswith("anonymous") else name


def _grade_put(put: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(put)
    def wrapped(self: Any, grade_id: str) -> None:
        put(self, grade_id)
        records.formgrader_graded(self.db_url, self.coursedir.root, grade_id, _user(self))
    return wrapped


def _refuse(command: str) -> Callable[..., None]:
    def refused(self: Any, *args: str) -> None:
        message = f"本课程不在 formgrader 中做这一步，请用：{command}"
        self.write(json.dumps({"success": False, "error": message, "log": message}, ensure_ascii=False))
    logged_in: Callable[..., None] = authenticated(refused)  # tornado is not read by mypy (pyproject.toml)
    return logged_in


def _local_math(write: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(write)
    def wrapped(self: Any, chunk: Any) -> None:
        if isinstance(chunk, str):
            query = CDN_MATHJAX.partition("?")[2]  # the same configuration, from the course's copy
            chunk = chunk.replace(CDN_MATHJAX, url_path_join(self.base_url or "/", LOCAL_MATHJAX, f"MathJax.js?{query}"))
        write(self, chunk)
    return wrapped


def assignments(root: str | Path, db_url: str) -> list[dict[str, Any]]:
    """What Manage Assignments lists: each released assignment, when `course release` released it, and how many
    submissions the gradebook holds for it."""
    found = []
    with Gradebook(db_url) as gb:
        for name, entry in sorted(released(root).items()):
            try:
                count = len(gb.find_assignment(name).submissions)
            except MissingEntry:
                count = 0
            found.append({"name": name, "released": entry.get("released", "").replace("T", " ")[:16],
                          "notebooks": sorted(entry.get("release", {})), "submissions": count})
    return found


def _manage_assignments_render(self: Any, name: str, **ns: Any) -> str:
    env = Environment(loader=ChoiceLoader([FileSystemLoader(str(TEMPLATES)),
                                           FileSystemLoader(handlers.template_path)]), autoescape=True)
    return env.get_template(name).render(**ns, assignments=assignments(self.coursedir.root, self.db_url))


def _manage_submissions_render(render: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(render)
    def wrapped(self: Any, name: str, **ns: Any) -> str:
        return render(self, name, **ns).replace('<ol class="breadcrumb">', HIDE_SUBMISSION_BUTTONS
                                                + '<ol class="breadcrumb">', 1)
    return wrapped


def _load_jupyter_server_extension(serverapp: Any) -> None:
    apihandlers.GradeHandler.put = _grade_put(apihandlers.GradeHandler.put)
    for handler, command in REFUSED.items():
        handler.post = _refuse(command)
    apihandlers.AssignmentHandler.put = _refuse("在 source/ 中写作业，再运行 course release <作业>")
    handlers.SubmissionHandler.write = _local_math(handlers.SubmissionHandler.write)
    handlers.ManageAssignmentsHandler.render = _manage_assignments_render
    handlers.ManageSubmissionsHandler.render = _manage_submissions_render(handlers.BaseHandler.render)
    mathjax = vendor_file(serverapp.root_dir, "mathjax/MathJax.js")
    if mathjax is None:
        serverapp.log.warning("attncourse: build/vendor has no MathJax (scripts/setup.sh installs it): formgrader "
                              "shows math as TeX")
        return
    pattern = url_path_join(serverapp.web_app.settings["base_url"], LOCAL_MATHJAX, "(.*)")
    serverapp.web_app.add_handlers(".*$", [(pattern, StaticFileHandler, {"path": str(mathjax.parent)})])
