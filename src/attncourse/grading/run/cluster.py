"""Grading on Dask workers: `course grade --cluster ADDRESS`, or `c.Cluster.address` in nbgrader_config.py.

The machine that runs `course grade` (the coordinator) keeps every step that reads the course or writes what
lasts: intake, the gradebook, `autograded/`, the records, the diagnoses. A worker gets only the execution: the
task carries the student's notebook, the instructor's cells from the gradebook (the hidden tests among them)
and the execute settings, and the worker runs it in its own sandbox with preloaded kernels (isolation/), as
local grading does, then sends back the executed notebook and what it found. A worker never reads the course
folder and writes nothing that outlives the task.

- A worker that dies mid-submission: the scheduler gives the task to another worker (Dask reschedules tasks of
  a lost worker), and the coordinator records the one result it receives.
- A scheduler that goes away: every submission under way raises `ClusterLost`, nothing is recorded for them,
  and `course grade` stops; the submissions already recorded keep their grade, so the next run grades only what
  is missing.
"""
import asyncio
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from distributed import Client, KilledWorker, WorkerPlugin, get_worker
from distributed.client import FutureCancelledError
from nbformat import NotebookNode
from traitlets import Integer, Unicode
from traitlets.config import Config, Configurable

from ..course import kernel_env
from ..isolation import sandbox as sandboxes
from ..isolation.preload import preloaded_kernels
from ..model import SubmissionResult
from . import certificates, tasks
from .execution import Instructor

PLUGIN = "attncourse-grading"
# Dask's loggers with handlers of their own: when the scheduler goes away, the client's reconnect attempts print
# tracebacks there. While grading, the coordinator says what happened in its own words (ClusterLost).
DASK_LOGGERS = ("distributed", "distributed.client", "tornado.application")


class Cluster(Configurable):
    """Where `course grade` sends submissions (`c.Cluster.*` in nbgrader_config.py)."""

    address = Unicode("", help="The Dask scheduler's address, such as 'tcp://10.0.0.5:8786' ('' grades on this "
                               "machine). `course grade --cluster` overrides it.").tag(config=True)
    connect_timeout = Integer(30, help="Seconds to wait for the scheduler when grading starts.").tag(config=True)
    certificates = Unicode("", help="A folder made by `course cluster-certs` (its ca.pem, client.pem, client.key): "
                                    "the coordinator then connects with TLS and mutual authentication, as the "
                                    "scheduler and workers must ('' : plain TCP, for a cluster on one machine "
                                    "only).").tag(config=True)


class ClusterLost(RuntimeError):
    """The scheduler went away, or a task's workers kept dying: the submission was not graded."""

    graded: int | None = None  # submissions graded and recorded before it went (None: before grading began)


class GradingWorker(WorkerPlugin):
    """A Dask worker plugin: the sandbox settings and a zygote of preloaded kernels for the worker's life.

    The zygote dies with the thread that started it (PR_SET_PDEATHSIG), so a thread of the plugin's own starts
    it and holds it until the worker closes."""

    name = PLUGIN

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.warnings: list[str] = []
        self.error: Exception | None = None
        self.sandboxed = False

    async def setup(self, worker: Any) -> None:
        # what the worker was started with wins: several workers may share one machine's cores
        os.environ.update({k: v for k, v in kernel_env(worker.state.nthreads).items() if k not in os.environ})
        ready, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(ready,), name=PLUGIN, daemon=True)
        self._thread.start()
        await asyncio.to_thread(ready.wait)
        if self.error is not None:
            raise self.error

    def _hold(self, ready: threading.Event) -> None:
        try:
            sandbox = sandboxes.for_grading(Config(self.config), self.warnings.append)
            self.sandboxed = sandbox is not None
            with preloaded_kernels(self.warnings.append, sandbox):
                ready.set()
                self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - raised by setup(): the coordinator reports it
            self.error = exc
        finally:
            ready.set()

    def teardown(self, worker: Any) -> None:
        self._stop.set()
        self._thread.join(60)


def execute(task: dict[str, Any]) -> dict[str, Any]:
    """On a worker: run one notebook as local grading runs it; returns what the coordinator needs."""
    plugin = cast(GradingWorker, get_worker().plugins[PLUGIN])
    with tempfile.TemporaryDirectory(prefix="attncourse-task-") as folder:
        for name, text in task["folder"].items():  # a sandboxed kernel gets the notebooks of its folder
            (Path(folder) / name).write_text(text, encoding="utf-8")
        return tasks.execute_here(task, folder, plugin.sandboxed)


class Workers:
    """The coordinator's handle on the cluster for one grading run."""

    def __init__(self, address: str, cfg: Config, warn: Callable[[str], object] = print, timeout: float = 30) -> None:
        self.address, self.lost = address, ""
        self._levels = {name: logging.getLogger(name).level for name in DASK_LOGGERS}
        for name in DASK_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        folder = Cluster(config=cfg).certificates
        security = certificates.security(folder) if folder else None  # only the course's own parties connect
        self.config = tasks.execute_config(cfg)
        try:
            self.client = Client(address, timeout=timeout, set_as_default=False, security=security)
        except (OSError, TimeoutError) as exc:
            self.close()
            raise ClusterLost(f"无法连接 Dask 调度器 {address}：{exc}") from exc
        try:
            self.client.register_plugin(GradingWorker(self.config), name=PLUGIN)
            if not self.client.nthreads():
                raise ClusterLost(f"Dask 调度器 {address} 上没有工作进程（dask worker {address}）")
            for worker, notes in sorted(self.client.run(_warnings).items()):
                for note in notes:
                    warn(f"[{worker}] {note}")
        except BaseException:
            self.close()
            raise

    def __deepcopy__(self, memo: object) -> "Workers":
        return self  # a handle: nbconvert deep-copies the resources it carries

    def lost_error(self) -> ClusterLost:
        return ClusterLost(self.lost)

    @property
    def threads(self) -> int:
        return sum(self.client.nthreads().values())

    def run(self, nb: NotebookNode, resources: dict[str, Any], instructor: Instructor,
            result: SubmissionResult) -> tuple[NotebookNode, dict[str, Any]]:
        """CourseExecute.run's contract, on a worker."""
        if self.lost:
            raise self.lost_error()
        info = resources["nbgrader"]
        folder = Path(resources["metadata"]["path"])
        task = tasks.task(nb, instructor, self.config)
        task["folder"] = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.ipynb"))}
        key = f"grade-{info['assignment']}-{info['student']}-{uuid.uuid4().hex[:8]}"
        try:
            reply = self.client.submit(execute, task, key=key, pure=False).result()
        except (FutureCancelledError, KilledWorker, OSError, TimeoutError) as exc:
            if not self.lost:
                why = "工作进程在评分同一份提交时反复退出" if isinstance(exc, KilledWorker) else "与调度器的连接中断"
                self.lost = f"Dask 集群 {self.address}：{why}（{type(exc).__name__}）"
            raise self.lost_error() from exc
        return tasks.take_reply(reply, result)

    def close(self) -> None:
        try:
            if hasattr(self, "client"):
                self.client.close(timeout=10)
        except Exception:  # noqa: BLE001 - a scheduler that is gone cannot be said goodbye to
            pass
        finally:
            for name, level in self._levels.items():
                logging.getLogger(name).setLevel(level)


def _warnings(dask_worker: Any) -> list[str]:
    return cast(GradingWorker, dask_worker.plugins[PLUGIN]).warnings
