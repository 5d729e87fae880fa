"""One submission's execution as a task for another process: a Dask worker (cluster.py) or a local executor
(executors.py). The task carries the student's notebook, the instructor's cells from the gradebook (the hidden
tests among them) and the execute settings; the reply, the executed notebook and what the execution found.

Both ends are the run's own trusted processes, and both notebooks travel as they are (pickled with the task):
nbgrader has read and validated the student's notebook, and validates the executed one as it writes it. Written
to JSON and read back with nbformat's validation, they cost the grader and its executor 20 ms per notebook."""
from typing import Any

from nbformat import NotebookNode
from traitlets.config import Config

from ..model import SubmissionResult
from .execution import CourseExecute, Failed, Instructor, SubmissionFailed

# the settings a task executes with; nothing else of nbgrader_config.py (the gradebook's URL) travels
SECTIONS = ("CourseExecute", "Execute", "ExecutePreprocessor", "NotebookClient", "Sandbox")


def execute_config(cfg: Config) -> dict[str, Any]:
    """The settings of `cfg` a task carries; the diagnosis of failed tests stays with the coordinator."""
    config = {name: dict(cfg[name]) for name in SECTIONS if name in cfg}
    config.get("CourseExecute", {}).pop("course_root", None)
    return config


def task(nb: NotebookNode, instructor: Instructor, config: dict[str, Any]) -> dict[str, Any]:
    return {"notebook": nb, "instructor": instructor.as_task(), "config": config}


def execute_here(task: dict[str, Any], folder: str, sandboxed: bool) -> dict[str, Any]:
    """Run `task` in this process, its kernel started in `folder`, as local grading runs it."""
    result = SubmissionResult(sandboxed=sandboxed)
    nb = task["notebook"]
    executor = CourseExecute(config=Config(task["config"]))
    try:
        nb, failed = executor.run(nb, {"metadata": {"path": folder}}, Instructor(**task["instructor"]), result)
    except SubmissionFailed:
        nb, failed = None, {}
    return {"notebook": nb, "failed": failed, "result": result}


def take_reply(reply: dict[str, Any], result: SubmissionResult) -> tuple[NotebookNode, Failed]:
    """CourseExecute.run's return, from `execute_here`'s reply; what it found is merged into `result`."""
    result.merge(reply["result"])
    if reply["notebook"] is None:
        raise SubmissionFailed(result.failure)
    return reply["notebook"], reply["failed"]
