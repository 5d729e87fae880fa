"""Deciding on a held submission in formgrader, signed by a person.

- The grading page of a submission with holds shows the banner as the decision stands (`review_banner.show_review`) and,
  while nobody has decided, one action for the whole submission: 计入 / 不计入 with a reason (it reaches the
  student's feedback) and the reviewer's name. The action writes through `records.decide`, as `course review`
  does.
- Entering the held cells' points one by one is the other way to decide (`records.formgrader_graded`, REVIEWED);
  the page sends the name from the same field with each score.
- Who signs: the name typed in the field, else the logged-in Jupyter user where the server knows a person
  (JupyterHub), else `c.Reviewer.name`. A token-only server's anonymous user is never recorded: the TA types a
  name, which the browser remembers.
"""
import functools
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

from nbconvert.exporters import HTMLExporter
from nbformat import NotebookNode
from nbgrader.api import MissingEntry
from nbgrader.server_extensions.formgrader import handlers
from nbgrader.server_extensions.formgrader.base import BaseApiHandler
from tornado.web import HTTPError, authenticated

from ... import records, review_banner
from ...cells import HOLD_BANNER
from ...course import nbgrader_config
from ...model import Outcome, Status

TEMPLATES = Path(__file__).resolve().parents[3] / "templates" / "formgrader"
REVIEWER_HEADER = "X-Course-Reviewer"  # the reviewer's name (URI-encoded) sent with each score the page saves
DECIDED_HEADER = "X-Course-Decided"  # in the answer to a score that completed a decision
API = "/formgrader/api/course_review"  # POST <base_url>/API/<submission notebook id>: under /formgrader, where
# the login cookie of a session started on a formgrader page reaches
ANONYMOUS = re.compile(r"[0-9a-f]{32}|anonymous\b.*", re.IGNORECASE)  # jupyter_server's names for a token's user
LOCAL_MATHJAX = "attncourse/mathjax"  # the course's MathJax 2 (build/vendor), served at <base_url>/LOCAL_MATHJAX/
MATHJAX_CONFIG = "TeX-AMS_CHTML-full,Safe"  # what nbconvert's `mathjax()` macro asks the CDN for
STATIC = "attncourse/formgrader/static"  # TEMPLATES/static (course.js, course.css), served at <base_url>/STATIC/
OUTCOME = "course_outcome"  # the resources key CourseFormgrade reads the submission's outcome from


def jupyter_user(handler: Any) -> str:
    """The logged-in user's name where the server knows a person (JupyterHub), else ""."""
    user = handler.current_user
    login = str(getattr(user, "username", "") or "")
    name = str(getattr(user, "display_name", "") or getattr(user, "name", "") or login).strip()
    return "" if not login or ANONYMOUS.fullmatch(login) or ANONYMOUS.fullmatch(name) else name


def prefilled(handler: Any) -> str:
    """The name the reviewer field starts with: the Jupyter user's, else `c.Reviewer.name`."""
    return jupyter_user(handler) or " ".join(records.Reviewer(config=nbgrader_config(handler.coursedir.root)).name.split())


def signer(handler: Any, given: str) -> str:
    """Who signs a decision made on this request: `given` (the field), else `prefilled`. ValueError (in Chinese)
    when nobody is named or the name is an anonymous or administrative login."""
    name = " ".join(given.split()) or prefilled(handler)
    if not name:
        raise ValueError("请在“复核人”一栏写上你的姓名：复核决定要记录是谁做的（用 token 登录的 Jupyter 不知道你是谁）")
    return records.reviewer(nbgrader_config(handler.coursedir.root), name)


def _submission(handler: Any, submission_id: str) -> tuple[str, str]:
    try:
        nb = handler.gradebook.find_submission_notebook_by_id(submission_id)
    except MissingEntry:
        raise HTTPError(404) from None
    return nb.assignment.assignment.name, nb.student.id


class ReviewHandler(BaseApiHandler):  # type: ignore[misc]  # nbgrader has no type information
    """POST {"accept": bool, "note": str, "reviewer": str}: the decision on the held points of the submission
    that notebook `submission_id` belongs to."""

    def decide(self, submission_id: str) -> None:
        assignment, student = _submission(self, submission_id)
        body = self.get_json_body() or {}
        accept, note = body.get("accept") is True, " ".join(str(body.get("note", "")).split())
        record = records.read_record(self.coursedir.root, assignment, student)
        try:
            if record is not None and record.review is not None:  # one decision per submission (a second click)
                raise ValueError(f"这份提交已经复核过：{record.review.describe()}")
            if not accept and not note:
                raise ValueError("不计入时请写明理由：学生会在反馈中看到它")
            by = signer(self, str(body.get("reviewer", "")))
            points = records.decide(self.db_url, self.coursedir.root, assignment, student, accept, by, note)
        except ValueError as exc:
            self.set_status(400)
            self.finish({"success": False, "error": str(exc)})
            return
        self.gradebook.db.expire_all()  # records wrote through a session of its own
        self.finish({"success": True, "reviewer": by, "points": points,
                     "label": (Status.ACCEPTED if accept else Status.REJECTED).label})

    post = authenticated(decide)  # tornado is not read by mypy (pyproject.toml)


def held_waiting(handler: Any, grade_id: str) -> bool:
    """Whether the score for `grade_id` is for a held test cell nobody has decided on yet."""
    try:
        grade = handler.gradebook.find_grade_by_id(grade_id)
    except MissingEntry:
        return False
    submission = grade.notebook.assignment
    record = records.read_record(handler.coursedir.root, submission.assignment.name, submission.student.id)
    return record is not None and record.review is None and grade.cell.name in record.held


def graded(put: Any) -> Any:
    """nbgrader's GradeHandler.put, signed: a score for a held cell needs a reviewer's name (nothing is saved
    without one), and the score that leaves no held cell waiting records the decision (`formgrader_graded`)."""
    @functools.wraps(put)
    def put_signed(self: Any, grade_id: str) -> None:
        held, by = held_waiting(self, grade_id), ""
        if held:
            try:
                by = signer(self, urllib.parse.unquote(self.request.headers.get(REVIEWER_HEADER, "")))
            except ValueError as exc:
                self.set_status(400)
                self.write(json.dumps({"success": False, "error": str(exc)}, ensure_ascii=False))
                return
        put(self, grade_id)
        if held:
            records.formgrader_graded(self.db_url, self.coursedir.root, grade_id, by)
            self.gradebook.db.expire_all()
            if not held_waiting(self, grade_id):
                self.set_header(DECIDED_HEADER, "1")
    return authenticated(put_signed)


class CourseFormgrade(HTMLExporter):
    """nbgrader's grading page with the course's Chinese templates; the review banner as the decision stands."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)  # type: ignore[no-untyped-call]  # nbconvert's Exporter.__init__ is not annotated

    def from_notebook_node(self, nb: NotebookNode, resources: dict[str, Any] | None = None,
                           **kw: Any) -> tuple[Any, dict[str, Any]]:
        outcome = (resources or {}).pop(OUTCOME, None)
        if isinstance(outcome, Outcome):
            review_banner.show_review(nb, outcome)
        return super().from_notebook_node(nb, resources, **kw)


class Page:
    """The exporter SubmissionHandler.get uses for one request: the course's, with what the page shows of the
    submission's outcome in `resources["course"]`."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def from_filename(self, filename: str, resources: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        h = self.handler
        if "attncourse_exporter" not in h.settings:  # nbgrader's configuration, the course's templates first
            h.settings["attncourse_exporter"] = CourseFormgrade(config=h.settings["nbgrader_exporter"].config,
                                                                extra_template_basedirs=[str(TEMPLATES),
                                                                                         handlers.template_path])
        exporter: CourseFormgrade = h.settings["attncourse_exporter"]
        outcome = records.read_outcome(h.db_url, h.coursedir.root, resources["assignment_id"], resources["student"])
        resources[OUTCOME] = outcome
        resources["course"] = page_view(h, outcome)
        resources["course_mathjax"] = f"{h.base_url}/{LOCAL_MATHJAX}/MathJax.js?config={MATHJAX_CONFIG}"
        return exporter.from_filename(filename, resources=resources)


def page_view(handler: Any, outcome: Outcome | None) -> dict[str, Any]:
    """What the grading page shows of a submission's outcome, and whether it offers the decision."""
    if outcome is None:
        return {}
    return {"status": str(outcome.status), "label": outcome.status.label, "banner_tag": HOLD_BANNER,
            "decide": bool(outcome.holds) and outcome.review is None, "withheld": f"{outcome.withheld:g}",
            "reviewer": prefilled(handler), "api": f"{handler.base_url}{API}", "header": REVIEWER_HEADER,
            "decided_header": DECIDED_HEADER}
