"""Running a submission's kernel: nbgrader's Execute, made safe to run several at once.

nbgrader's bookkeeping (gradebook, files) runs one thread at a time (`TURN`); only the kernel
execution, which is where the time goes, runs concurrently. A kernel that dies or ignores the
interrupt after a timeout ends the submission with a reason the report can show.
"""
import subprocess
import threading
from contextlib import contextmanager
from queue import Empty

from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import DeadKernelError
from nbgrader.preprocessors import Execute
from traitlets import Integer


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
_failure = threading.local()


class SubmissionFailed(Exception):
    """The submission could not be graded (its kernel died or hung)."""


def take_failure_reason():
    """The reason the last submission in this thread failed, once; '' if none was recorded."""
    reason = getattr(_failure, "reason", "")
    _failure.reason = ""
    return reason


def record_failure(reason):
    _failure.reason = reason


class QuietKernel:
    """Mixin for nbclient clients: the kernel's own log (e.g. ipykernel's TCP notice) stays off the
    console. Cell output, the student's prints included, reaches the notebook through IOPub as usual."""

    async def async_start_new_kernel(self, **kwargs):
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync twin at class level


class CourseExecute(QuietKernel, Execute):
    """Execute a submission while other threads grade other students."""

    interrupt_grace = Integer(10, help="Seconds a kernel has to answer the interrupt after a timeout "
                                       "before the submission is failed as hung.").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        with TURN.lent():
            try:
                return super().preprocess(nb, resources, km=km)
            except DeadKernelError as exc:
                record_failure("内核崩溃：提交的代码使 Python 进程退出（如 os._exit 或段错误）")
                raise SubmissionFailed(str(exc)) from exc

    async def _async_handle_timeout(self, timeout, cell=None):
        reply = await super()._async_handle_timeout(timeout, cell)
        try:  # the interrupted cell must answer, or the kernel is stuck for good
            await ensure_async(self.kc.shell_channel.get_msg(timeout=self.interrupt_grace))
        except Empty:
            record_failure(f"无限循环：单元格运行超过 {timeout} 秒，且不响应中断（Ctrl-C）")
            raise SubmissionFailed("kernel ignored the interrupt") from None
        return reply
