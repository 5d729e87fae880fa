"""Running a submission: the student's cells in the student's kernel, the test cells in the grader.

nbgrader's Execute runs every code cell in the kernel and counts a test cell as passed when no error was
printed, which student code can arrange. Here a test cell never reaches the kernel: its source is taken
from the gradebook and run by `trusted.run_test_cell` in this process, with the student's names as proxies.
The verdict becomes the cell's output (nothing, or one error), so nbgrader's own SaveAutoGrades scores it.

nbgrader's bookkeeping (gradebook, files) runs one thread at a time (`TURN`); only the execution and the
diagnosis of its failed tests, which is where the time goes, run concurrently. A kernel that dies or ignores the interrupt after a timeout ends the
submission with a reason (in the submission's `SubmissionResult`) the report can show.

Student code can write to the kernel's own sockets. A message the grader cannot read (malformed, unsigned or
badly signed: remote.CheckedChannel drops those; or one whose content nbclient cannot read) is dropped and
counted against the cell that was running, and the submission is held for review with a note naming the cell;
a cell whose reply never came, while the kernel is free again, is counted the same way. Grading goes on.
"""
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from queue import Empty
from typing import Any, NoReturn

from jupyter_client.manager import AsyncKernelManager, KernelManager
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellControlSignal, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Unicode, default

from ...kernels import QuietKernel
from .. import text
from ..cells import HIDDEN_PART, grade_id, is_test_cell
from ..isolation.preload import PROBE_ADDRESS, PreloadedProvisioner
from ..model import Hold, HoldKind, SubmissionResult
from ..protocol import remote, trusted, wire
from ..syntax import only_imports
from . import diagnosis, flags

# {grade_id: (message, tensors returned)} of each failed test cell
Failed = dict[str, tuple[str, list[Any]]]
RESULT = "course_result"  # the key of the SubmissionResult in nbconvert's resources (see autograde.py)
WORKERS = "course_workers"  # the key of the cluster that executes instead of this process (run/cluster.py)


class _Turn:
    """A lock that the holder can lend out while it waits on a kernel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            self._local.held = True
            try:
                yield
            finally:
                self._local.held = False

    @contextmanager
    def lent(self) -> Iterator[None]:
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


class _Slots:
    """How many submissions execute at once during a run (`limited`); any number outside one."""

    def __init__(self) -> None:
        self._slots: threading.BoundedSemaphore | None = None

    @contextmanager
    def limited(self, n: int) -> Iterator[None]:
        self._slots = threading.BoundedSemaphore(n)
        try:
            yield
        finally:
            self._slots = None

    @contextmanager
    def taken(self) -> Iterator[None]:
        slots = self._slots
        if slots is None:
            yield
            return
        with slots:
            yield


TURN = _Turn()
EXECUTING = _Slots()  # grade_class's jobs: kernels at once, while other threads keep their books
CRASHED = "内核崩溃：提交的代码使 Python 进程退出（如 os._exit、段错误或超出内存限制）"
LOST = "与内核的连接中断：提交的代码可能改动了评分程序（如发来超过上限的数据，或关掉了评分用的连接）"


class SubmissionFailed(Exception):
    """The submission could not be graded (its kernel died or hung)."""


def _error(message: str) -> NotebookNode:
    output: NotebookNode = new_output("error", ename="AssertionError", evalue=message, traceback=[message])
    return output


def _bounded_error(content: dict[str, Any], limit: int) -> NotebookNode:
    """An error output from a kernel's error message or reply, its message and traceback cut to `limit` characters
    in all (a student's exception may carry megabytes)."""
    traceback = content.get("traceback")
    lines = [str(line) for line in traceback] if isinstance(traceback, list) else []
    kept: list[str] = []
    left = limit // 2
    for line in lines:
        if left <= 0:
            kept.append(f"……（其余 {len(lines) - len(kept)} 行未显示）")
            break
        kept.append(text.cap(line, left))
        left -= len(line)
    output: NotebookNode = new_output("error", ename=text.plain(content.get("ename", "Error"), 100),
                                      evalue=text.cap(content.get("evalue", ""), limit // 2), traceback=kept)
    return output


def hung(timeout: int) -> str:
    return f"无限循环：单元格运行超过 {timeout} 秒，且不响应中断（Ctrl-C）"


class Instructor:
    """What the gradebook says about one notebook: which cells are the instructor's, and their sources. Plain
    data (`as_task`), so that it can travel with a submission to a grading worker (run/cluster.py)."""

    def __init__(self, sources: dict[str, str], tests: Iterable[str], locked: Iterable[str],
                 cells: dict[str, dict[str, Any]] | None = None, kinds: dict[str, list[str]] | None = None) -> None:
        self.sources, self.tests, self.locked = dict(sources), set(tests), set(locked)
        # the nbgrader cells as the gradebook lists them (autograde.py _SourceCells): {name: {cell_type, locked,
        # checksum, max_score (None: not graded)}} in its order, and {"grade"/"solution"/"task": [name]} in its order
        self.cells, self.kinds = dict(cells or {}), dict(kinds or {})
        self.imports = [self.sources[name] for name in sorted(self.locked - self.tests)
                        if only_imports(self.sources[name])]
        self.visible_tests = {HIDDEN_PART.sub("", self.sources[name]).strip() for name in self.tests}

    @classmethod
    def from_gradebook(cls, db_url: str, notebook: str, assignment: str) -> "Instructor":
        with Gradebook(db_url) as gb:
            nb = gb.find_notebook(notebook, assignment)
            sources = {c.name: c.source for c in nb.source_cells}
            kinds = {"grade": [c.name for c in nb.grade_cells], "solution": [c.name for c in nb.solution_cells],
                     "task": [c.name for c in nb.task_cells]}
            points = {c.name: c.max_score for c in [*nb.grade_cells, *nb.task_cells]}
            cells = {c.name: {"cell_type": c.cell_type, "locked": c.locked, "checksum": c.checksum,
                              "max_score": points.get(c.name)} for c in nb.source_cells}
        code = {name for name, cell in cells.items() if cell["cell_type"] == "code"}
        tests = code.intersection(kinds["grade"]) - set(kinds["solution"])
        locked = {name for name in code if cells[name]["locked"]}
        return cls(sources, tests, locked, cells, kinds)

    def as_task(self) -> dict[str, Any]:
        return {"sources": self.sources, "tests": sorted(self.tests), "locked": sorted(self.locked),
                "cells": self.cells, "kinds": self.kinds}

    def is_instructors(self, cell: NotebookNode) -> bool:
        """Test cells (run here, from the gradebook), unchanged locked cells, and pasted copies of what the
        student version shows of a test cell."""
        gid = grade_id(cell)
        return (gid in self.tests or (gid in self.locked and cell.source == self.sources[gid])
                or cell.source.strip() in self.visible_tests)

    def student_cells(self, nb: NotebookNode) -> list[tuple[int, str, str]]:
        """[(index, label, source)] of the code cells whose content is the student's."""
        return [(index, f"单元格 {grade_id(cell) or f'#{index + 1}'}", cell.source)
                for index, cell in enumerate(nb.cells)
                if cell.cell_type == "code" and not self.is_instructors(cell)]


class _Instructors:
    """The Instructor of each notebook, read from the gradebook once per grading run (`during`: its test cells
    do not change while it runs) rather than once per submission; outside a run, read each time."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str, str], Instructor] | None = None

    @contextmanager
    def during(self) -> Iterator[None]:
        self._found = {}
        try:
            yield
        finally:
            self._found = None

    def get(self, db_url: str, notebook: str, assignment: str) -> Instructor:
        found, key = self._found, (db_url, notebook, assignment)
        if found is None:
            return Instructor.from_gradebook(*key)
        if key not in found:
            found[key] = Instructor.from_gradebook(*key)
        return found[key]


INSTRUCTORS = _Instructors()


def read_forbidden_names(db_url: str, assignment: str) -> None:
    """Read each notebook's Instructor (`INSTRUCTORS`) and the names each test cell of `assignment` may forbid, as
    each kernel's start needs them (`remote.Session.watched_paths`; `remote.forbidden_names` keeps them): done once
    in the grader, before it forks its executors, rather than once in each executor. Only speed is lost where it
    fails: each submission's grading reads the gradebook again, and says what is wrong."""
    try:
        with Gradebook(db_url) as gb:
            notebooks = [notebook.name for notebook in gb.find_assignment(assignment).notebooks]
        for notebook in notebooks:
            instructor = INSTRUCTORS.get(db_url, notebook, assignment)
            for name in instructor.tests:
                remote.forbidden_names(instructor.sources[name])
    except Exception:  # noqa: BLE001 - see above
        pass


def review(result: SubmissionResult, nb: NotebookNode, instructor: Instructor) -> None:
    """Fill `result` with the review holds of the student's code, the test cells each could affect (those that
    run after it), and the notes."""
    tests = [(index, gid) for index, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and (gid := grade_id(cell)) is not None and gid in instructor.tests]
    for finding in flags.findings(instructor.student_cells(nb), instructor.imports):
        if finding.holds(result.sandboxed):
            result.holds.append(finding.hold())
            result.held.update(gid for index, gid in tests if index > finding.cell)
        elif finding.kind is None:
            result.notes.append(f"提示：{finding}")


class CourseKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, which looks every 5 ms, not every 100 ms, whether a killed kernel has
    ended: each graded kernel is killed, and its submission waited 0.1 s for it."""

    async def _async_wait(self, pollinterval: float = 0.005) -> None:
        await super()._async_wait(pollinterval)


class CourseExecute(QuietKernel, Execute):  # type: ignore[misc]  # nbgrader has no type information
    """Execute a submission while other threads grade other students; test cells are judged here."""

    interrupt_grace = Integer(10, help="Seconds a kernel has to answer the interrupt after a timeout "
                                       "before the submission is failed as hung.").tag(config=True)
    max_output_bytes = Integer(100_000, help="Output a cell may keep, in bytes; the rest is dropped with a "
                                             "note.").tag(config=True)
    max_notebook_output_bytes = Integer(1_000_000, help="Output the whole notebook may keep, in bytes; the rest is "
                                                        "dropped with a note.").tag(config=True)
    # An output message over the grader's byte budget is dropped by zmq (remote.BoundedClient), and the cell's
    # end may then not arrive on IOPub: the cell loses that output, the submission goes on.
    raise_on_iopub_timeout = Bool(False, help=Execute.raise_on_iopub_timeout.help).tag(config=True)
    course_root = Unicode("", help="The course folder whose catalog/ names likely mistakes in failed tests "
                                   "('' for none).").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_manager_class", CourseKernelManager)  # nbgrader's Execute sets jupyter_client's
        super().__init__(**kwargs)

    @default("shutdown_kernel")
    def _kill_graded_kernels(self) -> str:
        return "immediate"  # nothing of a graded kernel is kept: killed, not asked to shut down and waited for

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any],
                   km: KernelManager | None = None) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        self.result = resources.get(RESULT) or SubmissionResult()
        instructor = INSTRUCTORS.get(info["db_url"], info["notebook"], info["assignment"])
        diagnoser = diagnosis.unit(self.course_root, info["assignment"]) if self.course_root else None
        if diagnoser is None and self.course_root and diagnosis.catalog_path(self.course_root,
                                                                             info["assignment"]).is_file():
            self.result.notes.append(diagnosis.UNAVAILABLE)
        workers = resources.get(WORKERS)
        with TURN.lent():  # the execution, and the diagnosis of what it failed, while others keep their books
            with EXECUTING.taken():
                if workers is None:
                    nb, failed = self.run(nb, resources, instructor, self.result, km)
                else:
                    nb, failed = workers.run(nb, resources, instructor, self.result)
            start = time.perf_counter()
            self.diagnose(nb, failed, diagnoser)
            self.result.timed("diagnosis", time.perf_counter() - start)
        return nb, resources

    def run(self, nb: NotebookNode, resources: dict[str, Any], instructor: Instructor, result: SubmissionResult,
            km: KernelManager | None = None) -> tuple[NotebookNode, Failed]:
        """Execute `nb` here, filling `result`; returns the notebook and {grade_id: (message, returned)} of each
        failed test cell."""
        self.result, self.instructor = result, instructor
        self.failed: Failed = {}
        review(result, nb, instructor)
        self.session = remote.Session(self._send, instructor.imports)
        self.namespace = trusted.base_namespace(instructor.imports)
        self._kept_bytes: dict[int, int] = {}
        self._unread: Counter[str] = Counter()  # {channel: messages nbclient could not read}, besides the channels'
        self.channel: remote.Channel | None = None
        try:
            nb, resources = super().preprocess(nb, resources, km=km)
        except DeadKernelError:
            self._fail(CRASHED)
        finally:
            if self.channel is not None:
                self.channel.close()
        for cell in nb.cells:  # a forbidden call found by a later test fails the earlier tests of its question
            message = self.session.forbidden_answers.get(self.session.answer_of.get(grade_id(cell), ""))
            if message and is_test_cell(cell):
                cell.outputs = [_error(message)]
        if self.session.tampered:  # only a kernel whose grading machinery was changed sends what is not allowed
            result.holds.append(Hold(HoldKind.TAMPERED, f"{HoldKind.TAMPERED.reason}："
                                     + "；".join(dict.fromkeys(self.session.tampered))[:500]))
            result.held.update(instructor.tests)
        return nb, self.failed

    def diagnose(self, nb: NotebookNode, failed: Failed, diagnoser: diagnosis.Unit | None) -> None:
        """Name the likely mistake behind each failed test cell, in its output and in the result."""
        if diagnoser is None:
            return
        for cell in nb.cells:
            gid = grade_id(cell)
            if gid not in failed:
                continue
            message, returned = failed[gid]
            try:
                found = diagnoser.diagnose(gid, returned)
            except Exception:  # noqa: BLE001 - a diagnosis is a hint: the verdict stands without it
                found = None
            if found:
                self.result.diagnoses[gid] = {"id": found.variant, "label": found.label}
                if cell.outputs == [_error(message)]:  # not replaced by a forbidden call's message
                    cell.outputs = [_error(f"{message}\n{found.text()}")]

    def _fail(self, reason: str) -> NoReturn:
        self.result.failure = reason
        raise SubmissionFailed(reason)

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any],
                        index: int) -> tuple[NotebookNode, dict[str, Any]]:
        gid = grade_id(cell)
        start, unread = time.perf_counter(), self._unreadable()
        try:
            if cell.cell_type != "code" or gid not in self.instructor.tests:
                ran: tuple[NotebookNode, dict[str, Any]] = super().preprocess_cell(cell, resources, index)
                return ran
            return self._run_test_cell(cell, resources, gid)
        finally:
            step = "test cells" if gid in self.instructor.tests else "student cells"
            self.result.timed(step, time.perf_counter() - start)
            if dropped := self._unreadable() - unread:
                self.session.tampered.append(
                    f"单元格 {gid or f'#{index + 1}'}：内核的消息无法读取或缺失（格式错误、未签名或签名无效，"
                    + "、".join(f"{channel} 通道 {n} 条" for channel, n in sorted(dropped.items())) + "），已丢弃")

    def _unreadable(self) -> Counter[str]:
        """{channel: the kernel's messages dropped so far as unreadable}."""
        return Counter(self.kc.dropped() if self.kc is not None else {}) + self._unread

    def _run_test_cell(self, cell: NotebookNode, resources: dict[str, Any],
                       gid: str) -> tuple[NotebookNode, dict[str, Any]]:
        try:
            # a diagnosis run, which seeds torch in this process, waits; and this cell may wait for one: that wait
            # is not the student's time (under load it would time the cell out and lose its points)
            with diagnosis.RANDOM.drawing():
                self._deadline = time.monotonic() + self.timeout
                verdict = trusted.run_test_cell(self.instructor.sources[gid], gid, self.namespace, self.session)
        except remote.KernelLost as exc:
            self._fail({"died": CRASHED, "connection": LOST}.get(str(exc), hung(self.timeout)))
        if not verdict.passed:
            self.failed[gid] = (verdict.message, self.session.returned)
        cell.outputs = [] if verdict.passed else [_error(verdict.message)]
        return cell, resources

    def create_kernel_manager(self) -> KernelManager:
        km: KernelManager = super().create_kernel_manager()
        km.client_class = f"{remote.BoundedClient.__module__}.{remote.BoundedClient.__name__}"
        return km

    async def async_start_new_kernel_client(self) -> remote.BoundedClient:
        start = time.perf_counter()
        kc: remote.BoundedClient = await super().async_start_new_kernel_client()
        # before any student code: the kernel itself stops sending a cell's output past twice what is kept, and
        # binds the probe's own socket, through which `channel` sends every later request (probe.op_start)
        provisioner = self.km.provisioner
        sandboxed = isinstance(provisioner, PreloadedProvisioner) and provisioner.sandboxed
        key = os.urandom(32)  # the kernel's witness of forbidden calls signs its reports with it (witness.py)
        try:
            watched = self.session.watched_paths(self.instructor.sources[name] for name in self.instructor.tests)
            first = {"op": "start", "args": {"chars": 2 * self.max_output_bytes, "witness_key": key.hex(),
                                             "watched": watched,
                                             "address": PROBE_ADDRESS if sandboxed else remote.LOOPBACK}}
            reply = await remote.start(kc, self.km, first, self.startup_timeout, self.interrupt_grace)
        except (remote.KernelLost, remote.KernelTimeout):
            self._fail(CRASHED)
        if not isinstance(reply.get("ok"), str):  # no student code has run yet: the grader's own setup failed
            raise RuntimeError(f"the probe did not start in the kernel: {reply}")
        self.session.witness_key = key
        address = provisioner.reach_probe() if sandboxed else reply["ok"]
        self.channel = remote.Channel(address, kc.session, self.km, self.interrupt_grace)
        self.result.timed("kernel start", time.perf_counter() - start)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # nbclient binds its own otherwise

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        timeout = max(1.0, self._deadline - time.monotonic())
        assert self.channel is not None  # a request comes from a test cell, after the kernel started
        return self.channel.request(request, timeout)

    def output(self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str | None,
               cell_index: int) -> NotebookNode | None:
        """Keep at most `max_output_bytes` of a cell's output and `max_notebook_output_bytes` of the notebook's; a
        flood ends in one note. A cell's first error is always kept, its message and traceback cut to what is left
        of both (at least 1000 characters)."""
        kept = self._kept_bytes.get(cell_index, 0)
        total = sum(self._kept_bytes.values())
        if msg.get("msg_type") == "error":
            limit = min(self.max_output_bytes - kept, self.max_notebook_output_bytes - total)
            if limit < 1000 and any(out.get("output_type") == "error" for out in outs):
                return None  # the cell's error is there: one raised again and again is dropped
            limit = max(1000, limit)
            error = _bounded_error(msg.get("content", {}), limit)
            self._kept_bytes[cell_index] = kept + len(str(error))
            outs.append(error)
            return error
        size = len(str(msg.get("content", "")))
        if kept + size > self.max_output_bytes or total + size > self.max_notebook_output_bytes:
            if kept <= self.max_output_bytes:
                self._kept_bytes[cell_index] = self.max_output_bytes + 1
                outs.append(new_output("stream", name="stdout", text="\n……（输出过多，其余部分未保存）\n"))
            return None
        self._kept_bytes[cell_index] = kept + size
        out: NotebookNode | None = super().output(outs, msg, display_id, cell_index)
        return out

    def process_message(self, msg: dict[str, Any], cell: NotebookNode, cell_index: int) -> NotebookNode | None:
        """nbclient's, but a message signed with the kernel's key whose content nbclient cannot read (student
        code has the key) is dropped and counted, not raised."""
        try:
            out: NotebookNode | None = super().process_message(msg, cell, cell_index)
            return out
        except CellControlSignal:  # the cell's end
            raise
        except Exception:  # noqa: BLE001 - whatever nbclient raises on the content it reads
            self._unread["IOPub"] += 1
            return None

    def on_cell_executed(self, **kwargs: Any) -> None:
        """nbgrader's, which adds the reply's error to the cell when no output has it: cut as `output` cuts. A
        reply without a status nbclient knows counts as unreadable and fails the cell."""
        content = kwargs["execute_reply"]["content"]
        if content.get("status") not in ("ok", "error", "aborted"):
            self._unread["shell"] += 1
            content["status"] = "error"
        if content["status"] == "error":
            content.update(_bounded_error(content, self.max_output_bytes))
            content.pop("output_type")
        super().on_cell_executed(**kwargs)

    def handle_comm_msg(self, outs: list[NotebookNode], msg: dict[str, Any], cell_index: int) -> None:
        """Widgets are not part of a graded notebook: their messages are dropped."""

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> None | Exception:
        reply: None | Exception = await super()._async_handle_timeout(timeout, cell)
        try:  # the interrupted cell must answer, or the kernel is stuck for good
            await ensure_async(self.kc.shell_channel.get_msg(timeout=self.interrupt_grace))
        except Empty:
            if not self._between_cells():
                self._fail(hung(timeout))
            self._unread["shell"] += 1  # the cell ended, but its reply was lost (dropped, or never sent)
        return reply

    def _between_cells(self) -> bool:
        """Whether the kernel's main thread is free: the probe is served only between cells. Blocks this
        submission's event loop for at most twice the grace (a request, then its interrupt)."""
        assert self.channel is not None  # the kernel has started
        try:
            self.channel.request({"op": "names", "args": {"names": []}}, self.interrupt_grace)
        except (remote.KernelTimeout, remote.KernelLost, wire.WireError):
            return False
        return True
