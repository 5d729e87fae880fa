"""formgrader as the course uses it: a Jupyter server extension, enabled by scripts/setup.sh beside nbgrader's.

- The TA's pages are Chinese: the course's copies of nbgrader's templates (templates/formgrader/, found before
  nbgrader's) and static/course.js, which turns what nbgrader's scripts write into Chinese.
- Every list shows each row's outcome from the records, in the words every output uses (`lists.py`): held and
  failed rows are marked, a number is shown only where there is a grade (a held row's points read as in the
  report, with how many wait for review), and students the records know but
  nbgrader does not list (missing, not collected, failed) have their row.
- A held submission is decided on its grading page, by a named person, through the same records as `course
  review` (`review.py`); its banner follows the decision.
- Math renders from the course's own MathJax 2 (build/vendor, installed by setup.sh): no page asks a CDN.
- Manage Assignments shows what `course release` released (released.json) and the course's steps, without the
  exchange warning (the course does not use nbgrader's exchange). The buttons that would go around the course's
  checks (new assignment, generate, release, collect, autograde, generate and release feedback: formgrader's
  feedback would replace the course's and drop the MathJax beside each page) are not shown, and their API
  answers with the course command to use instead. JupyterLab's Nbgrader menu offers formgrader only
  (`hide_around_the_course`, run by setup.sh).

nbgrader 0.9.6's formgrader handlers and API are patched in place when this extension loads;
tests/test_internals.py fingerprints each method and template relied on.
"""
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.formgrader import apihandlers, base, handlers
from tornado.web import StaticFileHandler, authenticated

from ..feedback import vendor_file
from . import lists, review

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
# JupyterLab plugins whose Nbgrader menu entries go around the course's commands: the exchange's course and
# assignment lists (the course hands out zips and collects LMS downloads) and Create Assignment (assignments are
# written in source/ and checked by `course release`)
AROUND_THE_COURSE = ["@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list",
                     "@jupyter/nbgrader:create-assignment"]
TEMPLATES = Environment(loader=ChoiceLoader([FileSystemLoader(str(review.TEMPLATES)),
                                             FileSystemLoader(handlers.template_path)]), autoescape=True)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _refuse(command: str) -> Callable[..., None]:
    def refused(self: Any, *args: str) -> None:
        message = f"本课程不在 formgrader 中做这一步，请用：{command}"
        self.write(json.dumps({"success": False, "error": message, "log": message}, ensure_ascii=False))
    logged_in: Callable[..., None] = authenticated(refused)  # tornado is not read by mypy (pyproject.toml)
    return logged_in


def _render(self: Any, name: str, **ns: Any) -> str:
    """formgrader's pages from the course's templates; Manage Assignments with what `course release` released."""
    if name == "manage_assignments.tpl":
        ns["assignments"] = lists.assignments(self.coursedir.root, self.db_url)
    ns.setdefault("base_url", self.base_url)  # nbgrader's 404 page of a submission is given none
    return TEMPLATES.get_template(name).render(**ns, course_static=f"{self.base_url}/{review.STATIC}")


def hide_around_the_course(prefix: str | Path = sys.prefix) -> None:
    """Turn off, in the JupyterLab of the environment at `prefix`, the plugins of AROUND_THE_COURSE (what
    `jupyter labextension disable --level=sys_prefix` writes)."""
    path = Path(prefix) / "etc" / "jupyter" / "labconfig" / "page_config.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    config["disabledExtensions"] = {**config.get("disabledExtensions", {}), **dict.fromkeys(AROUND_THE_COURSE, True)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


async def _fresh_prepare(self: Any, **kwargs: Any) -> None:
    """Every formgrader request reads the gradebook as it is now: a decision `course review` took in another
    process since the last request is not hidden by the server's long-lived session."""
    await JupyterHandler.prepare(self, **kwargs)
    gradebook = self.settings.get("nbgrader_gradebook")
    if gradebook is not None:
        gradebook.db.expire_all()


def _load_jupyter_server_extension(serverapp: Any) -> None:
    base.BaseHandler.prepare = _fresh_prepare
    apihandlers.GradeHandler.put = review.graded(apihandlers.GradeHandler.put)
    for handler, command in REFUSED.items():
        handler.post = _refuse(command)
    apihandlers.AssignmentHandler.put = _refuse("在 source/ 中写作业，再运行 course release <作业>")
    base.BaseHandler.render = _render
    handlers.SubmissionHandler.exporter = property(review.Page)
    lists.wrap_api()
    base_url = serverapp.web_app.settings["base_url"]
    found = [(url_path_join(base_url, review.STATIC, "(.*)"), StaticFileHandler,
              {"path": str(review.TEMPLATES / "static")})]
    mathjax = vendor_file(serverapp.root_dir, "mathjax/MathJax.js")
    if mathjax is None:
        serverapp.log.warning("attncourse: build/vendor has no MathJax (scripts/setup.sh installs it): formgrader "
                              "shows math as TeX")
    else:
        found.append((url_path_join(base_url, review.LOCAL_MATHJAX, "(.*)"), StaticFileHandler,
                      {"path": str(mathjax.parent)}))
    serverapp.web_app.add_handlers(".*$", found)
    # nbgrader's formgrader extension, loaded after this one (jupyter_server loads them in alphabetical order),
    # registers the review API with its own handlers, before its catch-all for /formgrader/
    if "nbgrader_formgrader" in serverapp.web_app.settings:
        raise RuntimeError("attncourse's formgrader extension loaded after nbgrader's: formgrader cannot take "
                           "review decisions (course review still can)")
    apihandlers.default_handlers.append((review.API + "/([^/]+)", review.ReviewHandler))
