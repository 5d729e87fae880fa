"""Executing submissions in processes of their own on this machine, while the grader keeps the books.

A local run's grading threads share one interpreter lock. Each execution is hundreds of requests to a kernel, and
for each reply the waiting thread needs the lock, which nbgrader's bookkeeping of other submissions and the other
job's test cells hold in turn: with 2 jobs on 2 cores the machine was 76% busy. The same work in two processes
kept it 91% busy. So each job gets an executor: a process forked from the grader once the run's imports and the
preloading process are ready (nothing is imported again), which runs the execution step of one submission at a
time exactly as a Dask worker does (tasks.py), with kernels from the same preloading process and sandbox
settings, and uids of the run's block that no other executor takes (`sandbox.UidBlock.share`). The grader keeps
everything else: nbgrader's steps, the gradebook, the records and the diagnoses.

An executor is trusted code (no student code runs in it) and dies with the grader (PR_SET_PDEATHSIG). One that
dies mid-task fails that submission with a toolchain error, as an error of the grader's own would.
"""
import os
import pickle
import queue
import signal
import sys
import threading
from multiprocessing.connection import Connection, Pipe
from typing import Any

from nbformat import NotebookNode
from traitlets.config import Config

from .. import gradebook_engines
from ..isolation.preload import PreloadedProvisioner, die_with_parent
from ..model import SubmissionResult
from . import tasks
from .execution import Failed, Instructor

GONE = "评分进程意外退出：这份提交未能评分（不是学生的原因），可用 course grade --student <学号> 重评"


# Messages are pickled here, not by Connection.send: torch registers reductions with multiprocessing's pickler that
# would move every tensor through shared memory.
def _send(conn: Connection, obj: object) -> None:
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(conn: Connection) -> Any:
    """The next message (the peer is this run's own trusted process), or EOFError."""
    return pickle.loads(conn.recv_bytes())  # the grader or its own executor: both trusted


class Executors:
    """`jobs` executor processes for one local run, with the contract of cluster.Workers (`run`, `lost`)."""

    lost = ""  # never: an executor that dies fails only the submission it was running

    def __init__(self, cfg: Config, jobs: int, sandboxed: bool) -> None:
        self.config = tasks.execute_config(cfg)
        self.idle: queue.SimpleQueue[Connection | None] = queue.SimpleQueue()  # None: every executor is gone
        self.pids: list[int] = []
        self.lock = threading.Lock()
        grader = os.getpid()
        for index in range(jobs):
            mine, theirs = Pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the executor: of the grader's threads, only this one goes on
                mine.close()
                _serve(theirs, grader, index, jobs, sandboxed)
            theirs.close()
            self.pids.append(pid)
            self.idle.put(mine)
        self.live = jobs

    def lost_error(self) -> RuntimeError:
        return RuntimeError(self.lost)

    def __deepcopy__(self, memo: object) -> "Executors":
        return self  # a handle: nbconvert deep-copies the resources it carries

    def run(self, nb: NotebookNode, resources: dict[str, Any], instructor: Instructor,
            result: SubmissionResult) -> tuple[NotebookNode, Failed]:
        """CourseExecute.run's contract, in an idle executor."""
        conn = self.idle.get()
        if conn is None:
            self.idle.put(None)
            raise RuntimeError(GONE)
        try:
            _send(conn, (tasks.task(nb, instructor, self.config), resources["metadata"]["path"]))
            reply = _receive(conn)
        except (OSError, EOFError) as exc:
            conn.close()
            with self.lock:
                self.live -= 1
                if not self.live:
                    self.idle.put(None)
            raise RuntimeError(f"{GONE}（{type(exc).__name__}）") from exc
        self.idle.put(conn)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return tasks.take_reply(reply, result)

    def close(self, kill: bool = False) -> None:
        """End every executor (`kill`: at once, not after the submission it runs) and wait for it."""
        for pid in self.pids if kill else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while not self.idle.empty():
            if (conn := self.idle.get()) is not None:
                conn.close()  # an executor leaves at the end of its input
        for pid in self.pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _serve(conn: Connection, grader: int, index: int, parts: int, sandboxed: bool) -> None:
    """The executor's life: run each task the grader sends, until it closes the connection."""
    code = 0
    try:
        die_with_parent(grader)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the grader, which ends its executors
        gradebook_engines.forget_after_fork()
        if PreloadedProvisioner.zygote is not None:
            PreloadedProvisioner.zygote.forked()
        if PreloadedProvisioner.uids is not None:
            PreloadedProvisioner.uids.share(index, parts)
        while True:
            try:
                task, folder = _receive(conn)
            except EOFError:
                break
            try:
                reply = tasks.execute_here(task, folder, sandboxed)
            except Exception as exc:  # noqa: BLE001 - the grader fails this submission with it
                reply = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            _send(conn, reply)
    except BaseException:  # noqa: BLE001 - the grader sees the connection end
        code = 1
    finally:
        os._exit(code)
