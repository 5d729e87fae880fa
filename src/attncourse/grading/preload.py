"""Grading kernels that start with torch and d2l already imported.

Importing torch and d2l costs every grading kernel about 4 s of CPU, more than the tests themselves.
A warm process (the zygote) imports them once, and each grading kernel is a fork of it. Every
submission still gets a new process of its own: nothing a student's code does reaches the zygote or
another student's kernel.

`preloaded_kernels()` makes jupyter_client start python kernels this way for the duration of a
grading run; any other kernel command, or a zygote that fails to start, falls back to a normal launch.
"""
import importlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib.metadata import EntryPoint

from jupyter_client.provisioning import KernelProvisionerFactory, LocalProvisioner

NAME = "attncourse-preloaded"
PRELOAD = ["torch", "d2l.torch", "ipykernel.kernelapp", "matplotlib_inline.backend_inline"]
INLINE = "module://matplotlib_inline.backend_inline"  # what ipykernel sets for its kernels


class Zygote:
    """The warm process for one grading run, reached through a Unix socket."""

    def __init__(self, timeout=180):
        self.dir = tempfile.mkdtemp(prefix="attncourse-zygote-")
        self.path = os.path.join(self.dir, "socket")
        env = {**os.environ, "MPLBACKEND": os.environ.get("MPLBACKEND") or INLINE}
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, self.path], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while not os.path.exists(self.path):
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError("the preloading process did not start")
            time.sleep(0.05)

    def fork_kernel(self, argv, env, cwd):
        """Start a kernel (ipykernel's command-line `argv`) as a fork of the zygote; returns its pid."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.path)
            s.sendall(json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode() + b"\n")
            return int(json.loads(s.makefile().readline())["pid"])

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
                self.returncode = -1  # the zygote reaped it; the exit code is not ours to read
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
    """Launches ipykernel as a fork of the zygote; signals and kills go to the kernel's own group."""

    zygote = None  # set by preloaded_kernels()

    async def launch_kernel(self, cmd, **kwargs):
        if self.zygote is None or "ipykernel_launcher" not in cmd:
            return await super().launch_kernel(cmd, **kwargs)
        argv = cmd[cmd.index("ipykernel_launcher") + 1:]
        cwd = str(kwargs.get("cwd") or os.getcwd())
        pid = self.zygote.fork_kernel(argv, dict(kwargs.get("env") or os.environ), cwd)
        self.process = ForkedProcess(pid)
        self.pid = self.pgid = pid  # the kernel calls setsid(): its process group is its own
        self.cwd = pathlib.Path(cwd)
        return self.connection_info


@contextmanager
def preloaded_kernels(log=print):
    """Within the block, python kernels are forks of a zygote that has imported torch and d2l."""
    if sys.platform != "linux":  # forking a process that has imported torch is safe on Linux only
        yield
        return
    factory = KernelProvisionerFactory.instance()
    factory.provisioners[NAME] = EntryPoint(NAME, f"{__name__}:PreloadedProvisioner",
                                            "jupyter_client.kernel_provisioners")
    try:
        zygote = Zygote()
    except (OSError, RuntimeError) as exc:
        log(f"（未能预加载 torch/d2l，改用普通内核：{exc}）")
        yield
        return
    saved = factory.default_provisioner_name
    PreloadedProvisioner.zygote = zygote
    factory.default_provisioner_name = NAME
    try:
        yield
    finally:
        factory.default_provisioner_name = saved
        PreloadedProvisioner.zygote = None
        zygote.close()


def _die_with_parent():
    """Linux: receive SIGKILL when the parent exits, so no process outlives an interrupted run."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


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


def serve(path):
    """The zygote: import once, then fork a kernel per request."""
    _die_with_parent()
    for module in PRELOAD:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # kernels are reaped as they exit
    server = socket.socket(socket.AF_UNIX)
    server.bind(path + ".binding")
    server.listen(16)
    os.rename(path + ".binding", path)  # the socket appears only once it accepts
    while True:
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.makefile().readline())
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                _become_kernel(request)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


if __name__ == "__main__":
    serve(sys.argv[1])
