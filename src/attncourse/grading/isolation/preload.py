"""Grading kernels that start with torch and d2l already imported, each in a sandbox of its own.

Importing torch and d2l costs every grading kernel about 4 s of CPU, more than the tests themselves.
A warm process (the zygote, trusted, started by the grader) imports them once, and each grading kernel is a
fork of it. With a sandbox (see sandbox.py), the fork first joins the namespaces bubblewrap made for it,
becomes PID 1 of a new PID namespace and an unprivileged uid of its own, and only then becomes the kernel:
the zygote, the grader and other kernels are out of its sight and reach.

`preloaded_kernels()` makes jupyter_client start python kernels this way for the duration of a grading run.
A zygote that dies is started again; without a zygote (not Linux) kernels start the ordinary way.
"""
import base64
import importlib
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from importlib.metadata import EntryPoint

from jupyter_client.provisioning import KernelProvisionerFactory, LocalProvisioner

from . import sandbox as sandboxes

NAME = "attncourse-preloaded"
PRELOAD = ["torch", "d2l.torch", "ipykernel.kernelapp", "matplotlib_inline.backend_inline"]
INLINE = "module://matplotlib_inline.backend_inline"  # what ipykernel sets for its kernels
KERNEL_IPC = f"{sandboxes.HOME}/.kernel"  # where a sandboxed kernel binds its sockets
CONNECTION_FILE = f"{sandboxes.HOME}/.connection.json"


class Zygote:
    """The warm process for one grading run, reached through a Unix socket; restarted if it dies."""

    def __init__(self, modules=(), timeout=180):
        self.modules, self.timeout = list(modules), timeout
        self.dir = tempfile.mkdtemp(prefix="attncourse-zygote-")
        self.lock = threading.Lock()
        self._start()

    def _start(self):
        self.path = os.path.join(self.dir, f"socket-{time.monotonic_ns()}")
        env = {**os.environ, "MPLBACKEND": os.environ.get("MPLBACKEND") or INLINE}
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, self.path, str(os.getpid()), *self.modules], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + self.timeout
        while not os.path.exists(self.path):
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("the preloading process did not start")
            time.sleep(0.05)

    def fork_kernel(self, request):
        """Start a kernel as a fork of the zygote; returns its pid (in the grader's PID namespace)."""
        with self.lock:
            if self.proc.poll() is not None:
                self._start()
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.path)
            s.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(s.makefile().readline() or "{}")
        if "pid" not in reply:
            raise RuntimeError(f"the preloading process could not start a kernel: {reply.get('error')}")
        return int(reply["pid"])

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class ForkedProcess:
    """What LocalProvisioner needs of a Popen, for a kernel that is the zygote's child, not ours."""

    stdin = stdout = stderr = None

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1  # reaped by its keeper; the exit code is not ours to read
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.time() + timeout
        while self.poll() is None:
            if deadline is not None and time.time() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum):
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        self.send_signal(signal.SIGTERM)


class PreloadedProvisioner(LocalProvisioner):
    """Launches ipykernel as a fork of the zygote, sandboxed when a sandbox is configured; each sandboxed
    kernel runs as a uid of its own from the run's block (`sandbox.UidBlock`)."""

    zygote = None  # set by preloaded_kernels()
    sandbox = None
    uids = None
    uid = pool = None

    async def pre_launch(self, **kwargs):
        if self.sandbox is not None:  # a kernel without network talks over Unix sockets
            km = self.parent
            km.transport, km.cache_ports, km.ip = "ipc", False, KERNEL_IPC
        return await super().pre_launch(**kwargs)

    async def launch_kernel(self, cmd, **kwargs):
        if self.zygote is None or "ipykernel_launcher" not in cmd:
            return await super().launch_kernel(cmd, **kwargs)
        argv = cmd[cmd.index("ipykernel_launcher") + 1:]
        cwd = str(kwargs.get("cwd") or os.getcwd())
        env = dict(kwargs.get("env") or os.environ)
        info = self.connection_info
        if self.sandbox is None:
            pid = self.zygote.fork_kernel({"argv": argv, "env": env, "cwd": cwd})
        else:
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
            info = {**info, "ip": f"/proc/{pid}/root{KERNEL_IPC}"}  # the kernel's sockets, seen from here
        self.process = ForkedProcess(pid)
        self.pid = self.pgid = pid  # the kernel calls setsid(): its process group is its own
        self.cwd = pathlib.Path(cwd)
        self.connection_info = info
        return info

    async def cleanup(self, restart=False):
        await super().cleanup(restart)
        if self.uid is not None:
            self.pool.release(self.uid)
            self.uid = None


def sandboxed_env(env):
    """What a sandboxed kernel is told of its environment: nothing of the grader's beyond these."""
    keep = {k: env[k] for k in ("OMP_NUM_THREADS", "NBGRADER_EXECUTION", "LANG", "LC_ALL") if k in env}
    return {**keep, "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": sandboxes.HOME,
            "TMPDIR": "/tmp", "MPLBACKEND": INLINE, "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython"}


@contextmanager
def preloaded_kernels(log=print, sandbox=None, modules=()):
    """Within the block, python kernels are forks of a zygote that has imported torch, d2l and `modules`.

    `sandbox`: a `sandbox.Sandbox` whose settings every kernel gets, or None for unsandboxed kernels.
    """
    if sys.platform != "linux":  # forking a process that has imported torch is safe on Linux only
        yield
        return
    factory = KernelProvisionerFactory.instance()
    factory.provisioners[NAME] = EntryPoint(NAME, f"{__name__}:PreloadedProvisioner",
                                            "jupyter_client.kernel_provisioners")
    try:
        zygote = Zygote(modules)
    except (OSError, RuntimeError) as exc:
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

def _die_with_parent(parent=None):
    """Linux: receive SIGKILL when the parent exits, so no process outlives an interrupted run. `parent`: the
    pid it must have; if it has already gone (before the signal was armed), leave now."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _become_kernel(request):
    """In the forked child: a fresh kernel process, as `python -m ipykernel_launcher` would start."""
    try:
        _die_with_parent()
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
        from ipykernel.kernelapp import IPKernelApp
        app = IPKernelApp.instance()
        app.initialize(request["argv"])
        app.start()
    finally:
        os._exit(0)


def _fork_sandboxed(request):
    """Start the kernel inside a new sandbox; returns its pid. The zygote stays outside, untouched."""
    spec = request["sandbox"]
    settings = sandboxes.Sandbox(**spec["settings"])
    files = {path: base64.b64decode(data) for path, data in spec["files"].items()}
    holder_proc, holder = sandboxes.start_holder(settings)
    read, write = os.pipe()
    zygote = os.getpid()
    keeper = os.fork()
    if keeper == 0:  # the keeper: joins the sandbox, forks the kernel, waits for it, then leaves
        for fd in map(int, os.listdir("/proc/self/fd")):  # the zygote's socket stays out of the sandbox
            if fd > 2 and fd != write:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _die_with_parent(zygote)
            sandboxes.join(holder)
            alive_r, alive_w = os.pipe()  # open while the keeper lives: the kernel checks it once armed
            kernel = os.fork()
            if kernel == 0:
                os.close(write)
                os.close(alive_w)
                sandboxes.become_student(settings, spec["uid"], files)  # arms PDEATHSIG (to the keeper)
                if select.select([alive_r], [], [], 0)[0]:  # end of file: the keeper died before that
                    os._exit(1)
                os.close(alive_r)
                _become_kernel(request)
            os.close(alive_r)
            os.write(write, f"{kernel}\n".encode())
            os.close(write)
            os.waitpid(kernel, 0)
        except BaseException as exc:  # reported to the grader, which fails this submission's start
            os.write(write, f"error {exc}\n".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        line = answer.readline().strip()
    sandboxes.kill_holder(holder_proc, holder)
    if not line.isdigit():
        raise RuntimeError(line or "the keeper exited")
    return int(line)


def serve(path, grader, modules=()):
    """The zygote: import once, then fork a kernel per request."""
    _die_with_parent(grader)
    for module in [*PRELOAD, *modules]:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers and kernels are reaped as they exit
    server = socket.socket(socket.AF_UNIX)
    server.bind(path + ".binding")
    server.listen(16)
    os.rename(path + ".binding", path)  # the socket appears only once it accepts
    while True:
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.makefile().readline())
            if "sandbox" in request:
                try:
                    reply = {"pid": _fork_sandboxed(request)}
                except Exception as exc:  # the grader reports it; the zygote serves the next request
                    reply = {"error": str(exc)}
            else:
                pid = os.fork()
                if pid == 0:
                    server.close()
                    conn.close()
                    _become_kernel(request)
                reply = {"pid": pid}
            conn.sendall(json.dumps(reply).encode() + b"\n")


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
