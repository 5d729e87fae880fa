"""Running a submission: the student's cells in the student's kernel, the test cells in the grader.

nbgrader's Execute runs every code cell in the kernel and counts a test cell as passed when no error was
printed, which student code can arrange. Here a test cell never reaches the kernel: its source is taken
from the gradebook and run by `trusted.run_test_cell` in this process, with the student's names as proxies.
The verdict becomes the cell's output (nothing, or one error), so nbgrader's own SaveAutoGrades scores it.

nbgrader's bookkeeping (gradebook, files) runs one thread at a time (`TURN`); only the execution, which is
where the time goes, runs concurrently. A kernel that dies or ignores the interrupt after a timeout ends the
submission with a reason the report can show.
"""
import ast
import re
import subprocess
import threading
import time
from contextlib import contextmanager
from queue import Empty

from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_output
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute
from traitlets import Integer

from . import integrity, remote, trusted


class _Turn:
    """A lock that the holder can lend out while it waits on a kernel."""

    def __init__(self):
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextmanager
    def held(self):
        with self._lock:
            self._local.held = True
            try:
                yield
            finally:
                self._local.held = False

    @contextmanager
    def lent(self):
        if not getattr(self._local, "held", False):
            yield
            return
        self._local.held = False
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._local.held = True


TURN = _Turn()
_state = threading.local()  # what the submission graded in this thread left for its Outcome

HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)
CRASHED = "内核崩溃：提交的代码使 Python 进程退出（如 os._exit、段错误或超出内存限制）"


class SubmissionFailed(Exception):
    """The submission could not be graded (its kernel died or hung)."""


def start_submission():
    _state.failure, _state.flags = "", []


def failure_reason():
    """Why the submission graded last in this thread failed ('' if no reason was recorded)."""
    return getattr(_state, "failure", "")


def review_flags():
    return list(getattr(_state, "flags", []))


def _fail(reason):
    _state.failure = reason
    raise SubmissionFailed(reason)


def hung(timeout):
    return f"无限循环：单元格运行超过 {timeout} 秒，且不响应中断（Ctrl-C）"


class QuietKernel:
    """Mixin for nbclient clients: the kernel's own log (e.g. ipykernel's TCP notice) stays off the
    console. Cell output, the student's prints included, reaches the notebook through IOPub as usual."""

    async def async_start_new_kernel(self, **kwargs):
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync twin at class level


class Instructor:
    """What the gradebook says about one notebook: which cells are the instructor's, and their sources."""

    def __init__(self, db_url, notebook, assignment):
        with Gradebook(db_url) as gb:
            nb = gb.find_notebook(notebook, assignment)
            self.sources = {c.name: c.source for c in nb.source_cells}
            solutions = {c.name for c in nb.solution_cells}
            self.tests = {c.name for c in nb.grade_cells if c.cell_type == "code"} - solutions
            locked = {c.name for c in nb.source_cells if c.locked and c.cell_type == "code"}
        self.imports = [self.sources[name] for name in sorted(locked - self.tests) if _only_imports(self.sources[name])]
        self.locked = locked
        self.visible_tests = {HIDDEN.sub("", self.sources[name]).strip() for name in self.tests}

    def is_instructors(self, cell):
        """Test cells (run here, from the gradebook), unchanged locked cells, and pasted copies of what the
        student version shows of a test cell."""
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        return (grade_id in self.tests or (grade_id in self.locked and cell.source == self.sources[grade_id])
                or cell.source.strip() in self.visible_tests)

    def student_cells(self, nb):
        """[(grade_id or None, label, source)] of the code cells whose content is the student's."""
        return [(cell.metadata.get("nbgrader", {}).get("grade_id"),
                 f"单元格 {cell.metadata.get('nbgrader', {}).get('grade_id') or f'#{index + 1}'}", cell.source)
                for index, cell in enumerate(nb.cells)
                if cell.cell_type == "code" and not self.is_instructors(cell)]


def _only_imports(source):
    try:
        body = integrity.parse(source).body
    except SyntaxError:
        return False
    return bool(body) and all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)


class CourseExecute(QuietKernel, Execute):
    """Execute a submission while other threads grade other students; test cells are judged here."""

    interrupt_grace = Integer(10, help="Seconds a kernel has to answer the interrupt after a timeout "
                                       "before the submission is failed as hung.").tag(config=True)
    max_output_bytes = Integer(100_000, help="Output a cell may keep, in bytes; the rest is dropped with a "
                                             "note.").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        info = resources["nbgrader"]
        self.instructor = Instructor(info["db_url"], info["notebook"], info["assignment"])
        student = self.instructor.student_cells(nb)
        _state.flags = getattr(_state, "flags", []) + integrity.review_flags(
            [(label, source) for _, label, source in student], self.instructor.imports)
        self.session = remote.Session(self._send, [(gid, source) for gid, _, source in student],
                                      self.instructor.imports)
        self.namespace = trusted.base_namespace(self.instructor.imports)
        self._kept_bytes = {}
        with TURN.lent():
            try:
                return super().preprocess(nb, resources, km=km)
            except DeadKernelError as exc:
                _fail(CRASHED)

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or grade_id not in self.instructor.tests:
            return super().preprocess_cell(cell, resources, index)
        self._deadline = time.monotonic() + self.timeout
        try:
            verdict = trusted.run_test_cell(self.instructor.sources[grade_id], grade_id, self.namespace,
                                            self.session)
        except remote.KernelLost as exc:
            _fail(CRASHED if str(exc) == "died" else hung(self.timeout))
        cell.outputs = [] if verdict.passed else [
            new_output("error", ename="AssertionError", evalue=verdict.message, traceback=[verdict.message])]
        return cell, resources

    def _send(self, request):
        timeout = max(1.0, self._deadline - time.monotonic())
        return run_sync(remote.kernel_request)(self.kc, self.km, request, timeout, self.interrupt_grace)

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most `max_output_bytes` of a cell's output; a flood ends in one note."""
        size = len(str(msg.get("content", "")))
        kept = self._kept_bytes.get(cell_index, 0)
        if kept + size > self.max_output_bytes:
            if kept <= self.max_output_bytes:
                self._kept_bytes[cell_index] = self.max_output_bytes + 1
                outs.append(new_output("stream", name="stdout", text="\n……（输出过多，其余部分未保存）\n"))
            return None
        self._kept_bytes[cell_index] = kept + size
        return super().output(outs, msg, display_id, cell_index)

    def handle_comm_msg(self, outs, msg, cell_index):
        """Widgets are not part of a graded notebook: their messages are dropped."""

    async def _async_handle_timeout(self, timeout, cell=None):
        reply = await super()._async_handle_timeout(timeout, cell)
        try:  # the interrupted cell must answer, or the kernel is stuck for good
            await ensure_async(self.kc.shell_channel.get_msg(timeout=self.interrupt_grace))
        except Empty:
            _fail(hung(timeout))
        return reply
