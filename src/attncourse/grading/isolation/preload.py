"""Grading kernels that start with torch and d2l already imported, each in a sandbox of its own.

Importing torch and d2l costs every grading kernel about 4 s of CPU, more than the tests themselves.
A warm process (the zygote, trusted, started by the grader) imports them once, and each grading kernel is a
fork of it. With a sandbox (see sandbox.py), the fork first joins the namespaces bubblewrap made for it,
becomes PID 1 of a new PID namespace and an unprivileged uid of its own, and only then becomes the kernel:
the zygote, the grader and other kernels are out of its sight and reach.

`preloaded_kernels()` makes jupyter_client start python kernels this way for the duration of a grading run.
A zygote that dies is started again; without a zygote (not Linux) kernels start the ordinary way. `start_early()`
starts the run's zygote before the grader's own imports and the class's intake, which its imports then overlap.
"""
import atexit
import base64
import gc
import importlib
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import EntryPoint
from typing import Any, NoReturn

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.factory import KernelProvisionerFactory
from jupyter_client.provisioning.local_provisioner import LocalProvisioner

from . import sandbox as sandboxes

NAME = "attncourse-preloaded"
PRELOAD = ["torch", "d2l.torch", "ipykernel.kernelapp", "matplotlib_inline.backend_inline",
           "torch.nn.attention.flex_attention",  # the witness watches its functions (remote.OPERATIONS)
           # what a kernel imports as it starts
           "ipykernel.ipkernel", "ipykernel.debugger", "IPython.core.completerlib", f"{__package__}.forked_kernel",
           f"{__package__.rpartition('.')[0]}.protocol.probe"]  # the grader's hands in a kernel, bound at its start
GRADER_IMPORTS = ["d2l.torch"]
INLINE = "module://matplotlib_inline.backend_inline"  # what ipykernel sets for its kernels
KERNEL_IPC = f"{sandboxes.HOME}/.kernel"  # where a sandboxed kernel binds its sockets: <KERNEL_IPC>-<port>
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
PROBE = "probe"  # the name of the probe's own socket beside the kernel's: <KERNEL_IPC>-probe
PROBE_ADDRESS = f"ipc://{KERNEL_IPC}-{PROBE}"  # where a sandboxed kernel binds it (protocol/probe.py op_start)
CONNECTION_FILE = f"{sandboxes.HOME}/.connection.json"


class Zygote:
    """The warm process for one grading run, reached through a Unix socket; restarted if it dies."""

    def __init__(self, timeout: float = 180) -> None:
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="attncourse-zygote-")
        self.lock = threading.Lock()
        self._spawn()

    def _spawn(self) -> None:
        self.path = os.path.join(self.dir, f"socket-{time.monotonic_ns()}")
        self.proc: subprocess.Popen[bytes] | ForkedProcess = subprocess.Popen([sys.executable, "-m", __name__, self.path, str(os.getpid())], env=zygote_env(),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

    def wait(self, meanwhile: Iterable[Callable[[], object]] = ()) -> None:
        """Return once the zygote has imported everything and listens; RuntimeError if it does not. Until then,
        run the steps of `meanwhile`, one at a time (what is left of it is not run)."""
        deadline, steps = time.time() + self.timeout, iter(meanwhile)
        while not os.path.exists(self.path):
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("the preloading process did not start")
            step = next(steps, None)
            if step is None:
                time.sleep(0.005)
            else:
                step()

    def link(self, pid: int, ports: Sequence[object], fds: Sequence[int]) -> str:
        """A folder of the grader's own with a link per kernel socket to its open file descriptor; returns the
        prefix to connect to (`<prefix>-<port>`)."""
        prefix = os.path.join(self.dir, f"k{pid}")
        for port, fd in zip(ports, fds, strict=True):
            os.symlink(f"/proc/{os.getpid()}/fd/{fd}", f"{prefix}-{port}")
        return prefix

    def fork_kernel(self, request: dict[str, Any]) -> int:
        """Start a kernel as a fork of the zygote; returns its pid (in the grader's PID namespace)."""
        with self.lock:
            if self.proc.poll() is not None:
                self._spawn()
                self.wait()
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.path)
            s.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(s.makefile().readline() or "{}")
        if "pid" not in reply:
            raise RuntimeError(f"the preloading process could not start a kernel: {reply.get('error')}")
        return int(reply["pid"])

    def forked(self) -> None:
        """In a process forked from the grader (run/executors.py): the zygote is not this process's child, so
        whether it lives is read from its pid, not waited for."""
        self.proc = ForkedProcess(self.proc.pid)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


_early: Zygote | None = None  # started by start_early, not yet taken by a run


def start_early() -> None:
    """Start the next grading run's zygote now (Linux): its imports take seconds, which the grader's own imports
    and the reading of the class then overlap. The run takes it (`preloaded_kernels`); one never taken is closed
    as this process exits."""
    global _early
    if sys.platform != "linux" or _early is not None:
        return
    try:
        _early = Zygote()
    except OSError:
        pass  # the run starts its own, and reports what fails then


def _take_early() -> Zygote | None:
    """The zygote `start_early` started, if it still runs (it is then the caller's to close); else None."""
    global _early
    zygote, _early = _early, None
    if zygote is not None and zygote.proc.poll() is not None:
        zygote.close()
        return None
    return zygote


@atexit.register
def _close_early() -> None:
    zygote = _take_early()
    if zygote is not None:
        zygote.close()


def zygote_env() -> dict[str, str]:
    """The zygote's environment, which every kernel can read back from /proc/self/environ: nothing of the
    grader's but the paths Python needs."""
    keep = {k: os.environ[k] for k in ("LANG", "LC_ALL", "PYTHONPATH") if k in os.environ}
    return {**keep, "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": tempfile.gettempdir(),
            "MPLBACKEND": INLINE}


def open_sockets(pid: int, uid: int, ports: Iterable[object], timeout: float = 60.0) -> list[int]:
    """O_PATH descriptors of a sandboxed kernel's Unix sockets, found without following anything the kernel
    could have written: each folder of `KERNEL_IPC` is opened with O_NOFOLLOW from the kernel's root, and each
    socket must be a socket of the kernel's uid. The grader connects through these descriptors, so that a link
    or another file the kernel puts there later is never followed."""
    flags = os.O_PATH | os.O_NOFOLLOW
    deadline = time.monotonic() + timeout
    root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY)
    folder = root
    try:
        for part in pathlib.PurePosixPath(KERNEL_IPC).parent.parts[1:]:
            folder, parent = os.open(part, flags | os.O_DIRECTORY, dir_fd=folder), folder
            os.close(parent)
        fds = []
        for port in ports:
            while True:
                try:
                    fd = os.open(f"{pathlib.PurePosixPath(KERNEL_IPC).name}-{port}", flags, dir_fd=folder)
                except FileNotFoundError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the kernel did not open its sockets") from None
                    time.sleep(0.01)
                    continue
                st = os.fstat(fd)
                if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
                    os.close(fd)
                    raise RuntimeError("the kernel's socket is not a socket of its own")
                fds.append(fd)
                break
        return fds
    finally:
        os.close(folder)


class ForkedProcess:
    """What LocalProvisioner needs of a Popen, for a kernel that is the zygote's child, not ours."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1  # reaped by the zygote; the exit code is not ours to read
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.time() + timeout
        while self.poll() is None:
            if deadline is not None and time.time() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class PreloadedProvisioner(LocalProvisioner):
    """Launches ipykernel as a fork of the zygote, sandboxed when a sandbox is configured; each sandboxed
    kernel runs as a uid of its own from the run's block (`sandbox.UidBlock`)."""

    zygote: Zygote | None = None  # set by preloaded_kernels()
    sandbox: dict[str, Any] | None = None
    uids: sandboxes.UidBlock | None = None
    uid: int | None = None
    pool: sandboxes.UidBlock | None = None
    fds: Sequence[int] = ()  # O_PATH descriptors of the sandboxed kernel's sockets (see open_sockets)

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        if self.sandbox is not None:  # a kernel without network talks over Unix sockets
            km: Any = self.parent
            km.transport, km.cache_ports, km.ip = "ipc", False, KERNEL_IPC
        return await super().pre_launch(**kwargs)

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        if self.zygote is None or "ipykernel_launcher" not in cmd:
            return await super().launch_kernel(cmd, **kwargs)
        argv = cmd[cmd.index("ipykernel_launcher") + 1:]
        cwd = str(kwargs.get("cwd") or os.getcwd())
        env = dict(kwargs.get("env") or os.environ)
        info = self.connection_info
        if self.sandbox is None:
            pid = self.zygote.fork_kernel({"argv": argv, "env": env, "cwd": cwd})
        else:
            assert self.uids is not None  # set with the sandbox
            self.pool = self.uids
            self.uid = self.pool.take()
            connection = argv[argv.index("-f") + 1]
            files = {CONNECTION_FILE: pathlib.Path(connection).read_bytes()}
            files.update({f"{sandboxes.HOME}/{p.name}": p.read_bytes() for p in sorted(pathlib.Path(cwd).glob("*.ipynb"))})
            argv[argv.index("-f") + 1] = CONNECTION_FILE
            pid = self.zygote.fork_kernel({
                "argv": argv, "env": sandboxed_env(env), "cwd": sandboxes.HOME,
                "sandbox": {"settings": self.sandbox, "uid": self.uid,
                            "files": {k: base64.b64encode(v).decode() for k, v in files.items()}}})
            ports = [info[key] for key in PORTS]  # type: ignore[literal-required]
            self.fds = open_sockets(pid, self.uid, ports)
            info = {**info, "ip": self.zygote.link(pid, ports, self.fds)}  # the kernel's sockets, through the fds
        self.process = ForkedProcess(pid)  # type: ignore[assignment]  # what LocalProvisioner uses of a Popen
        self.pid = self.pgid = pid  # the kernel calls setsid(): its process group is its own
        self.cwd = pathlib.Path(cwd)
        self.connection_info = info
        return info

    @property
    def sandboxed(self) -> bool:
        return self.uid is not None

    def reach_probe(self) -> str:
        """The address the grader connects to for the probe's socket of a sandboxed kernel, bound before any of
        the student's code ran: through a descriptor, as for the kernel's other sockets."""
        assert self.zygote is not None and self.uid is not None and self.pid is not None  # a sandboxed kernel's
        self.fds = [*self.fds, *open_sockets(self.pid, self.uid, [PROBE])]
        return f"ipc://{self.zygote.link(self.pid, [PROBE], self.fds[-1:])}-{PROBE}"

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart)
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if self.uid is not None and self.pool is not None:
            self.pool.release(self.uid)
            self.uid = None


def sandboxed_env(env: dict[str, str]) -> dict[str, str]:
    """What a sandboxed kernel is told of its environment: nothing of the grader's beyond these."""
    keep: dict[str, str] = {k: env[k] for k in ("OMP_NUM_THREADS", "NBGRADER_EXECUTION", "LANG", "LC_ALL") if k in env}
    return {**keep, "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": sandboxes.HOME,
            "TMPDIR": "/tmp", "MPLBACKEND": INLINE, "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython"}


@contextmanager
def preloaded_kernels(log: Callable[[str], object] = print, sandbox: sandboxes.Sandbox | None = None,
                      meanwhile: Iterable[Callable[[], object]] = ()) -> Iterator[None]:
    """Within the block, python kernels are forks of a zygote that has imported torch, d2l and the probe: the one
    `start_early` started, else a new one.

    `sandbox`: a `sandbox.Sandbox` whose settings every kernel gets, or None for unsandboxed kernels.
    `meanwhile`: steps of the grader's own work, run here while the zygote imports (see `Zygote.wait`).
    """
    if sys.platform != "linux":  # forking a process that has imported torch is safe on Linux only
        yield
        return
    factory = KernelProvisionerFactory.instance()
    factory.provisioners[NAME] = EntryPoint(NAME, f"{__name__}:PreloadedProvisioner",
                                            "jupyter_client.kernel_provisioners")
    zygote = None
    try:
        zygote = _take_early() or Zygote()
        enabled = gc.isenabled()
        gc.disable()  # as in the zygote (`serve`): no collections during the imports
        try:
            for module in GRADER_IMPORTS:  # meanwhile, on another core: what the grader's test cells import
                importlib.import_module(module)
        finally:
            if enabled:
                gc.enable()
        zygote.wait(meanwhile)
    except (OSError, RuntimeError) as exc:
        if zygote is not None:
            zygote.close()
        if sandbox is not None:
            raise RuntimeError(f"沙箱需要预加载进程，但它未能启动：{exc}") from exc
        log(f"（未能预加载 torch/d2l，改用普通内核：{exc}）")
        yield
        return
    saved = factory.default_provisioner_name
    PreloadedProvisioner.zygote = zygote
    if sandbox is not None:
        PreloadedProvisioner.sandbox = {name: getattr(sandbox, name) for name in sandbox.trait_names()
                                        if sandbox.trait_metadata(name, "config")}
        PreloadedProvisioner.uids = uids = sandboxes.UidBlock(sandbox.uid_base)
        uids.kill_all()  # left over from a run that was killed
    factory.default_provisioner_name = NAME
    try:
        yield
    finally:
        factory.default_provisioner_name = saved
        PreloadedProvisioner.zygote = PreloadedProvisioner.sandbox = PreloadedProvisioner.uids = None
        zygote.close()
        if sandbox is not None:
            left = uids.kill_all()
            uids.close()
            if left:
                log(f"（结束时清理了 {len(left)} 个仍在运行的沙箱进程：{'；'.join(left[:3])}）")


# --- the zygote's side ------------------------------------------------------------------------------------------

def die_with_parent(parent: int | None = None) -> None:
    """Linux: receive SIGKILL when the parent exits, so no process outlives an interrupted run. `parent`: the
    pid it must have; if it has already gone (before the signal was armed), leave now."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _become_kernel(request: dict[str, Any]) -> NoReturn:
    """In the forked child: a fresh kernel process, as `python -m ipykernel_launcher` would start."""
    try:
        die_with_parent()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # as a new process has it (the zygote ignores its children)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import random

        import numpy
        import torch
        random.seed()  # a new process draws new seeds; a fork would repeat the zygote's
        numpy.random.seed()
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
        if sys.path and sys.path[0] in ("", os.getcwd()):
            sys.path.pop(0)  # as ipykernel_launcher does; IPython puts the kernel's cwd back
        from . import forked_kernel
        forked_kernel.run(request["argv"])
    finally:
        os._exit(0)


def _fork_sandboxed(request: dict[str, Any], alive: int) -> int:
    """Start the kernel inside a new sandbox; returns its pid once it has joined it. The kernel is forked straight
    into a PID namespace of its own and joins the holder's other namespaces itself; the zygote stays outside.
    `alive`: the read end of a pipe whose write end only the zygote holds, at end of file once it has died."""
    spec = request["sandbox"]
    settings = sandboxes.Sandbox(**spec["settings"])
    files = {path: base64.b64decode(data) for path, data in spec["files"].items()}
    holder_proc, holder = sandboxes.start_holder(settings)
    try:
        read, write = os.pipe()
        with os.fdopen(read) as answer:
            found: list[tuple[int, int]] = []
            try:
                found = sandboxes.namespaces(holder)
                kernel = sandboxes.fork_in_new_pid_namespace()
                if kernel == 0:
                    _join_sandbox(request, settings, files, found, alive, write)
            finally:  # the zygote's copies (the kernel never comes back here)
                os.close(write)
                for fd, _ in found:
                    os.close(fd)
            line = answer.readline().strip()
    finally:
        sandboxes.kill_holder(holder_proc, holder)
    if line != "ready":
        raise RuntimeError(line or "the kernel exited before it joined its sandbox")
    return kernel


def _join_sandbox(request: dict[str, Any], settings: sandboxes.Sandbox, files: dict[str, bytes],
                  found: list[tuple[int, int]], alive: int, report: int) -> NoReturn:
    """In the forked kernel: leave the zygote's descriptors behind, join the sandbox, become the student, say
    "ready" (or the error) on `report`, then become the kernel. It never returns to the zygote's code."""
    try:
        keep = {report, alive, *(fd for fd, _ in found)}
        for fd in map(int, os.listdir("/proc/self/fd")):  # the zygote's sockets and pipes stay out of the sandbox
            if fd > 2 and fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        sandboxes.join(found)
        sandboxes.become_student(settings, request["sandbox"]["uid"], files)  # arms PDEATHSIG (to the zygote)
        if select.select([alive], [], [], 0)[0]:  # end of file: the zygote died before that
            os._exit(1)
        os.close(alive)
        os.write(report, b"ready\n")
        os.close(report)
    except BaseException as exc:  # noqa: BLE001 - reported to the grader, which fails this submission's start
        try:
            os.write(report, f"error {exc}\n".encode())
        finally:
            os._exit(0)
    _become_kernel(request)


MAX_REQUEST = 256 << 20  # bytes of one request (the notebook travels in it, base64)


def valid_request(request: Any) -> dict[str, Any]:
    """A request to fork a kernel, checked field by field (ValueError otherwise): the zygote is root, and a
    request it misreads must be refused, not obeyed or crash it."""
    def strings(value: object, what: str) -> None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{what} must be a list of strings")

    if not isinstance(request, dict) or set(request) - {"argv", "env", "cwd", "sandbox"}:
        raise ValueError("unknown request")
    strings(request.get("argv"), "argv")
    env = request.get("env")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError("env must map strings to strings")
    if not isinstance(request.get("cwd"), str):
        raise ValueError("cwd must be a string")
    spec = request.get("sandbox")
    if spec is not None:
        if not isinstance(spec, dict) or set(spec) != {"settings", "uid", "files"}:
            raise ValueError("bad sandbox request")
        if type(spec["uid"]) is not int or spec["uid"] < 1000:
            raise ValueError("the kernel's uid must be an unprivileged one")
        files = spec["files"]
        if not isinstance(files, dict) or not all(
                isinstance(k, str) and k.startswith(sandboxes.HOME + "/") and ".." not in k.split("/")
                and isinstance(v, str) for k, v in files.items()):
            raise ValueError("files must be under the kernel's home")
        if not isinstance(spec["settings"], dict):
            raise ValueError("bad sandbox settings")
    return request


def serve(path: str, grader: int) -> None:
    """The zygote: import once, then fork a kernel per request. A request it cannot read gets an error reply;
    the zygote goes on serving."""
    die_with_parent(grader)
    # No garbage collection until its objects are frozen, as Python's `gc.freeze` advises for a process that forks:
    # the imports take a third less time without the collections they trigger, and no holes freed in the zygote's
    # pages are left for each kernel to fill (and copy). Frozen, its objects stay out of each kernel's collections,
    # which would copy their pages; each kernel collects its own.
    gc.disable()
    for module in PRELOAD:
        importlib.import_module(module)
    gc.freeze()
    gc.enable()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # kernels are reaped as they exit
    alive, _ = os.pipe()  # its write end open while the zygote lives (`_fork_sandboxed`)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path + ".binding")
    server.listen(16)
    os.rename(path + ".binding", path)  # the socket appears only once it accepts
    while True:
        conn, _ = server.accept()
        with conn:
            reply: dict[str, Any]
            try:
                request = valid_request(json.loads(conn.makefile("rb").readline(MAX_REQUEST)))
                if "sandbox" in request:
                    reply = {"pid": _fork_sandboxed(request, alive)}
                else:
                    pid = os.fork()
                    if pid == 0:
                        server.close()
                        conn.close()
                        _become_kernel(request)
                    reply = {"pid": pid}
            except Exception as exc:  # noqa: BLE001 - the grader reports it; the zygote serves the next request
                reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
