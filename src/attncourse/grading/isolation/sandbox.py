"""A sandbox for every grading kernel, built by bubblewrap and joined by a forked, preloaded process.

bubblewrap (`bwrap`, as root) builds each sandbox: a mount namespace that holds only read-only system and
Python files and two small tmpfs (`/home/student`, `/tmp`), no network (a new network namespace), and its
own IPC and UTS namespaces. A kernel is forked by the zygote (see preload.py) as the first process of a PID
namespace of its own (so everything it starts dies with it), joins those namespaces, mounts /proc for its PID
namespace, sets resource limits, and drops to an unprivileged uid of its own before any of the student's code
runs. The course folder, the gradebook, the class folder and other students' kernels are not in its world.

Where bubblewrap cannot run (not Linux, not root, not installed), grading goes on with ordinary kernels and
says so loudly: the student's code then runs with the grader's identity and files.
"""
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traitlets import Int, Unicode
from traitlets.config import Config, Configurable

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = (
    0x00020000, 0x04000000, 0x08000000, 0x40000000, 0x20000000)
NAMESPACES = {"net": CLONE_NEWNET, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS, "mnt": CLONE_NEWNS}
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
HOME = "/home/student"
# bubblewrap waits for its child, which SIGCHLD ignored (as the zygote has it) would hang: coreutils' env sets it
# back before bwrap runs, so that subprocess can start it with vfork: a fork of the zygote (a preexec_fn) copies
# its page tables and tears them down again, 0.027 s more for each kernel
BWRAP = ["env", "--default-signal=CHLD", "bwrap"]
_libc = ctypes.CDLL(None, use_errno=True)


class Sandbox(Configurable):
    """Settings of the grading sandbox (`c.Sandbox.*` in nbgrader_config.py)."""

    mode = Unicode("auto", help="'auto': sandbox kernels where bubblewrap works, else warn and grade without; "
                                "'required': refuse to grade without; 'off': never sandbox.").tag(config=True)
    memory = Int(4 << 30, help="Bytes of data (RLIMIT_DATA) each process of a kernel may allocate.").tag(config=True)
    processes = Int(128, help="Processes and threads a kernel may run at once (RLIMIT_NPROC).").tag(config=True)
    file_size = Int(64 << 20, help="Largest file a kernel may write, in bytes (RLIMIT_FSIZE).").tag(config=True)
    disk = Int(256 << 20, help="Size of each of the kernel's writable folders (/home/student, /tmp), in bytes."
               ).tag(config=True)
    uid_base = Int(61000, help="Kernels run as uids from uid_base up (a new one per kernel, 10000 in all); no "
                               "other process on the machine may use them.").tag(config=True)

    def problem(self) -> str:
        """Why sandboxes cannot be made here ('' when they can)."""
        if sys.platform != "linux":
            return "只有 Linux 支持沙箱"
        if os.geteuid() != 0:
            return "需要以 root 身份运行（bubblewrap 以 root 建立命名空间，内核再降为无特权用户）"
        if not shutil.which("bwrap"):
            return "未安装 bubblewrap（Debian/Ubuntu：apt-get install bubblewrap）"
        try:
            seccomp_filter()
        except (ImportError, OSError, RuntimeError) as exc:
            return f"无法建立 seccomp 过滤（需要 libseccomp2 与 pyseccomp）：{exc}"
        run = subprocess.run([*BWRAP, *self.bwrap_args(), "--", "/usr/bin/true"], capture_output=True, text=True)
        return f"bubblewrap 无法运行：{run.stderr.strip()[:300]}" if run.returncode else ""

    def bwrap_args(self) -> list[str]:
        """The filesystem and namespaces of one sandbox (the command follows `--`)."""
        args = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--hostname", "grader", "--dev", "/dev", "--perms", "0555", "--dir", "/proc",  # the kernel mounts its own
                "--size", str(self.disk), "--tmpfs", "/tmp", "--size", str(self.disk), "--tmpfs", HOME]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        made = {"/", "/tmp", "/home", HOME, "/dev", "/proc"}
        for path in readable_paths():
            for parent in reversed(Path(path).parents):
                if str(parent) not in made:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(str(parent))
            args += ["--ro-bind", path, path]
            made.add(path)
        for device in sorted(Path("/dev").glob("nvidia*")):  # a GPU grader's CUDA devices
            args += ["--dev-bind", str(device), str(device)]
        if any(Path("/dev").glob("nvidia*")):
            args += ["--ro-bind", "/sys", "/sys"]
        return args


def readable_paths() -> list[str]:
    """What a kernel may read: system files and this Python's installation, nothing of the course."""
    package_root = str(Path(__file__).resolve().parents[3])  # the folder holding attncourse (src/ when editable)
    paths = ["/usr", "/etc", sys.base_prefix, sys.prefix, package_root]
    found: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)}):
        if not any(path.startswith(f + "/") for f in found):
            found.append(path)
    return found


def start_holder(sandbox: Sandbox) -> tuple["subprocess.Popen[bytes]", int]:
    """Start a sandbox that holds still; returns (Popen, pid of a process inside whose namespaces to join).

    bubblewrap reports the pid before it has built the filesystem, so the holder also says "ready" once it
    runs: by then the sandbox is complete.
    """
    read, write = os.pipe()
    proc = subprocess.Popen([*BWRAP, *sandbox.bwrap_args(), "--info-fd", str(write), "--",
                             "/bin/sh", "-c", "echo ready; exec sleep infinity"], pass_fds=[write],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read, "rb") as info:
        data = info.read()  # bubblewrap closes the fd after writing
    assert proc.stdout is not None  # stdout=PIPE
    if proc.stdout.readline() != b"ready\n" or b"child-pid" not in data:
        proc.kill()
        raise RuntimeError("bubblewrap exited before the sandbox was ready")
    return proc, int(json.loads(data)["child-pid"])


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def namespaces(holder_pid: int) -> list[tuple[int, int]]:
    """[(descriptor, CLONE_NEW…)] of the holder's namespaces, for the kernel to `join`; the caller closes them."""
    found: list[tuple[int, int]] = []
    try:
        for name, flag in NAMESPACES.items():
            found.append((os.open(f"/proc/{holder_pid}/ns/{name}", os.O_RDONLY), flag))
    except BaseException:
        for fd, _ in found:
            os.close(fd)
        raise
    return found


def fork_in_new_pid_namespace() -> int:
    """`os.fork()`, the child the first process (PID 1) of a new PID namespace, so that everything it starts dies
    with it; the caller's later children are born in the caller's own namespace again."""
    own = os.open("/proc/self/ns/pid", os.O_RDONLY)
    try:
        _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
        try:
            pid = os.fork()
        except BaseException:
            _check(_libc.setns(own, CLONE_NEWPID), "setns(pid)")
            raise
        if pid:
            _check(_libc.setns(own, CLONE_NEWPID), "setns(pid)")
        return pid
    finally:
        os.close(own)


def join(found: list[tuple[int, int]]) -> None:
    """In the kernel, single-threaded, PID 1 of its namespace: enter the sandbox's namespaces (`namespaces`)."""
    for fd, flag in found:
        _check(_libc.setns(fd, flag), f"setns({flag:#x})")
        os.close(fd)


def become_student(sandbox: Sandbox, uid: int, files: dict[str, bytes]) -> None:
    """In the kernel (PID 1 of its namespace, still root): /proc, the files it needs, limits, then the uid.

    `files` maps paths inside the sandbox to their bytes (the notebook, the connection file)."""
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount(/proc)")
    for path, data in files.items():
        Path(path).write_bytes(data)
        os.chown(path, uid, uid)
    for folder in (HOME, "/tmp"):
        os.chown(folder, uid, uid)
        os.chmod(folder, 0o700)
    import resource
    for limit, value in ((resource.RLIMIT_DATA, sandbox.memory), (resource.RLIMIT_NPROC, sandbox.processes),
                         (resource.RLIMIT_FSIZE, sandbox.file_size), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_NOFILE, 1024)):
        resource.setrlimit(limit, (value, value))
    flt = seccomp_filter()  # built while the files it needs can still be read
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    flt.load()
    os.chdir(HOME)


# System calls a kernel never needs and that could carry data between students or reach outside the sandbox: the
# kernel keyring (shared by every process of a uid), tracing and reading other processes' memory, namespaces,
# mounts, kernel modules and BPF. They fail with EPERM (libseccomp, through pyseccomp).
DENIED_SYSCALLS = ("keyctl", "add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev",
                   "perf_event_open", "bpf", "userfaultfd", "mount", "umount2", "unshare", "setns", "pivot_root",
                   "chroot", "kexec_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
                   "reboot", "acct", "quotactl", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm",
                   "syslog", "fanotify_init", "move_mount", "open_tree", "fsopen", "fsmount", "fspick")


def seccomp_filter() -> Any:
    """The kernel's seccomp filter (not yet loaded): everything allowed but DENIED_SYSCALLS."""
    import errno

    import pyseccomp
    flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            flt.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            continue  # a system call this architecture does not have
    return flt


def kill_holder(proc: "subprocess.Popen[bytes]", holder_pid: int) -> None:
    """The holder is only needed until the kernel has joined: its namespaces live on in the kernel."""
    try:
        os.kill(holder_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


BLOCK, BLOCKS = 1000, 10  # a run's kernels use one block of uids: uid_base + block * BLOCK + 0 … BLOCK - 1


class UidBlock:
    """The uids one grading run gives its kernels: a block no other run on this machine uses at the same time
    (claimed with an exclusive flock), so that cleaning up never touches another run's kernels. Each kernel gets
    a uid no earlier kernel of the run had (a run of more than BLOCK kernels starts again from the first free
    one), so that nothing a uid owns passes from one student to the next."""

    def __init__(self, base: int) -> None:
        folder = Path(tempfile.gettempdir()) / "attncourse-uid-blocks"
        folder.mkdir(exist_ok=True)
        for block in range(BLOCKS):
            handle = open(folder / f"{base}-{block}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.handle, self.first = handle, base + block * BLOCK
            self.used: set[int] = set()
            self.lock, self.next = threading.Lock(), 0
            self.offsets = range(BLOCK)
            return
        raise RuntimeError(f"all {BLOCKS} blocks of sandbox uids are in use")

    def share(self, index: int, parts: int) -> None:
        """From now on, in this process (a copy of the run's block forked into one of `parts` executors,
        run/executors.py), take only the uids of share `index`: no other executor takes them."""
        self.offsets, self.next = range(index, BLOCK, parts), 0

    def take(self) -> int:
        with self.lock:
            for step in range(len(self.offsets)):
                uid = self.first + self.offsets[(self.next + step) % len(self.offsets)]
                if uid not in self.used:
                    self.next = (self.next + step + 1) % len(self.offsets)
                    self.used.add(uid)
                    return uid
            raise RuntimeError(f"all {len(self.offsets)} sandbox uids of this run are in use")

    def release(self, uid: int) -> None:
        with self.lock:
            self.used.discard(uid)

    def kill_all(self) -> list[str]:
        """SIGKILL every process running as one of this block's uids; returns what was killed."""
        killed = []
        for entry in Path("/proc").iterdir():
            try:
                uid = int((entry / "status").read_text().split("\nUid:")[1].split()[0])
                if self.first <= uid < self.first + BLOCK:
                    killed.append(f"{entry.name}: uid {uid}, {(entry / 'cmdline').read_bytes()[:80]!r}")
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                pass
        return killed

    def close(self) -> None:
        self.handle.close()  # releases the flock


class SandboxUnavailable(RuntimeError):
    """`c.Sandbox.mode = 'required'` and no sandbox can be made here."""


def for_grading(cfg: Config, warn: Callable[[str], object]) -> "Sandbox | None":
    """The Sandbox settings to grade with, or None (after a loud warning through `warn`) where none can be made."""
    settings = Sandbox(config=cfg)
    if settings.mode == "off":
        warn("⚠ 警告：沙箱已关闭（c.Sandbox.mode = 'off'），学生代码以评分者的身份和权限运行。")
        return None
    problem = settings.problem()
    if not problem:
        return settings
    if settings.mode == "required":
        raise SandboxUnavailable(f"无法建立评分沙箱：{problem}")
    warn(f"⚠ 警告：无法建立评分沙箱（{problem}）。学生代码将以评分者的身份和权限运行，"
         "能读取课程文件与成绩库；正式评分请在 Linux 上以 root 运行并安装 bubblewrap。")
    return None
