"""The sandbox's surroundings: a loud warning where none can be made, a preloading process that comes back."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook


def test_without_a_sandbox_grading_says_so_loudly(monkeypatch):
    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.isolation import sandbox

    from conftest import ROOT
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    said = []
    assert sandbox.for_grading(nbgrader_config(ROOT), said.append) is None
    assert "警告" in said[0] and "bubblewrap" in said[0] and "权限" in said[0]
    cfg = nbgrader_config(ROOT)
    cfg.Sandbox.mode = "required"
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap"):
        sandbox.for_grading(cfg, said.append)


@pytest.mark.slow
def test_a_lost_preloading_process_is_started_again(tmp_path):
    from nbclient import NotebookClient

    from attncourse.grading.isolation import preload, sandbox
    settings = sandbox.Sandbox()
    nb = new_notebook(cells=[new_code_cell("import os\nprint(os.getuid())")])
    nbformat.write(nb, tmp_path / "x.ipynb")
    with preload.preloaded_kernels(print, None if settings.problem() else settings):
        zygote = preload.PreloadedProvisioner.zygote
        zygote.proc.kill()
        zygote.proc.wait()
        NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
        assert zygote.proc.poll() is None, "a new preloading process should be running"
    assert nb.cells[0].outputs[0].text.strip().isdigit()


@pytest.mark.slow
def test_a_preloading_process_started_early_is_the_runs_and_one_never_taken_is_closed(tmp_path):
    """`start_early` starts the next run's zygote ahead of the run (commands.grade, grade_submissions): the run
    takes that one, it serves the run's kernels and the run closes it; one that no run took is closed at exit."""
    import os

    from nbclient import NotebookClient

    from attncourse.grading.isolation import preload
    preload.start_early()
    early = preload._early
    assert early is not None
    preload.start_early()  # already started: the same one
    assert preload._early is early
    nb = new_notebook(cells=[new_code_cell("import os\nprint(os.getppid())")])
    with preload.preloaded_kernels(print):
        assert preload.PreloadedProvisioner.zygote is early and preload._early is None
        NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert int(nb.cells[0].outputs[0].text) == early.proc.pid, "the kernel is not a fork of the early zygote"
    assert early.proc.poll() is not None and not os.path.exists(early.dir)
    preload.start_early()
    left = preload._early
    assert left is not None and left is not early
    preload._close_early()  # what the process does as it exits (atexit)
    assert preload._early is None and left.proc.poll() is not None and not os.path.exists(left.dir)


@pytest.mark.slow
def test_a_preloaded_kernel_collects_its_own_garbage_only_and_lists_no_modules(tmp_path):
    """The zygote imports with the garbage collector off and freezes what it made (`preload.serve`): a kernel
    forked from it must have the collector on again, and the zygote's objects frozen, out of its collections. Its
    kernel is a ForkedKernel, which did not list every module's file for a debugger, and it keeps its history in
    memory (isolation/forked_kernel.py)."""
    from nbclient import NotebookClient

    from attncourse.grading.isolation import preload
    nb = new_notebook(cells=[new_code_cell(
        "import gc\nk = get_ipython().kernel\n"
        "print(gc.isenabled(), gc.get_freeze_count(), type(k).__name__, hasattr(k, '_kernel_modules'), "
        "k.shell.history_manager.enabled, len(In))")])
    with preload.preloaded_kernels(print):
        NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    enabled, frozen, kernel, listed, history, inputs = nb.cells[0].outputs[0].text.split()
    assert enabled == "True", "the kernel's garbage collector is off"
    assert int(frozen) > 100_000, f"only {frozen} of the zygote's objects were frozen"
    assert (kernel, listed, history, inputs) == ("ForkedKernel", "False", "False", "2"), (kernel, listed, history, inputs)


def test_the_grader_works_while_the_preloading_process_imports(tmp_path):
    """Until the zygote listens, its wait runs the grader's steps one at a time; the rest are left for later."""
    import subprocess

    from attncourse.grading.isolation import preload
    zygote = preload.Zygote.__new__(preload.Zygote)  # its process: one that is still importing
    zygote.path, zygote.timeout, zygote.proc = str(tmp_path / "socket"), 30, subprocess.Popen(["sleep", "30"])
    done = []

    def step(number):
        done.append(number)
        if number == 2:
            (tmp_path / "socket").touch()  # it listens from now on

    try:
        zygote.wait(lambda number=number: step(number) for number in range(10))
    finally:
        zygote.proc.kill()
        zygote.proc.wait()
    assert done == [0, 1, 2]


# --- the grader reaches a kernel's sockets without following what the kernel wrote ------------------------------

def test_kernel_sockets_are_opened_without_following_links(tmp_path, monkeypatch):
    import os
    import socket

    from attncourse.grading.isolation import preload
    home = tmp_path / "home" / "student"
    home.mkdir(parents=True)
    monkeypatch.setattr(preload, "KERNEL_IPC", str(home / ".kernel"))
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(home / ".kernel-1"))
    server.listen(1)
    fds = preload.open_sockets(os.getpid(), os.getuid(), [1])
    link = tmp_path / "link-1"
    os.symlink(f"/proc/self/fd/{fds[0]}", link)
    os.unlink(home / ".kernel-1")  # the student removes the socket file and plants a link to another socket
    other = socket.socket(socket.AF_UNIX)
    other.bind(str(tmp_path / "elsewhere"))
    os.symlink(tmp_path / "elsewhere", home / ".kernel-1")
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(link))
    accepted, _ = server.accept()  # the kernel's own socket answered, not the one the link points to
    accepted.close()
    with pytest.raises(RuntimeError, match="not a socket of its own"):
        preload.open_sockets(os.getpid(), os.getuid(), [1], timeout=1)  # a planted link is refused
    os.rename(home, tmp_path / "moved")
    os.symlink(tmp_path / "moved", home)  # a folder of the path replaced by a link
    with pytest.raises(OSError):
        preload.open_sockets(os.getpid(), os.getuid(), [1], timeout=1)


@pytest.mark.parametrize("request_", [
    None, [], {"argv": "ls", "env": {}, "cwd": "/"}, {"argv": [], "env": {"A": 1}, "cwd": "/"},
    {"argv": [], "env": {}, "cwd": "/", "extra": 1},
    {"argv": [], "env": {}, "cwd": "/", "sandbox": {"settings": {}, "uid": 0, "files": {}}},
    {"argv": [], "env": {}, "cwd": "/", "sandbox": {"settings": {}, "uid": 61000, "files": {"/etc/passwd": ""}}},
    {"argv": [], "env": {}, "cwd": "/",
     "sandbox": {"settings": {}, "uid": 61000, "files": {"/home/student/../../etc/x": ""}}},
])
def test_the_preloading_process_refuses_requests_it_cannot_trust(request_):
    from attncourse.grading.isolation import preload
    with pytest.raises(ValueError):
        preload.valid_request(request_)
    assert preload.valid_request({"argv": ["-f", "x"], "env": {"A": "1"}, "cwd": "/home/student", "sandbox": {
        "settings": {}, "uid": 61000, "files": {"/home/student/x.ipynb": ""}}})


@pytest.mark.slow
@pytest.mark.needs_root
def test_a_sandboxed_kernel_sees_no_grader_environment_and_no_keyring(tmp_path, monkeypatch):
    """The kernel's environment, also as /proc/self/environ shows it, holds nothing of the grader's, and the
    kernel keyring (shared by a uid's processes) cannot be used: seccomp refuses add_key and keyctl."""
    from nbclient import NotebookClient

    from attncourse.grading.isolation import preload, sandbox
    monkeypatch.setenv("ATTN_TEST_SECRET", "grader-secret-4711")
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "key = libc.syscall(248, b'user', b'note', b'secret', 6, -4)  # add_key to the user keyring\n"
            "print('add_key', key, ctypes.get_errno())\n"
            "try:\n    seen = open('/proc/self/environ', 'rb').read().count(b'grader-secret')\n"
            "except PermissionError:\n    seen = 0  # a process that changed its uid cannot read its own /proc files\n"
            "print('environ', seen, 'ATTN_TEST_SECRET' in os.environ)\n")
    nb = new_notebook(cells=[new_code_cell(code)])
    nbformat.write(nb, tmp_path / "x.ipynb")
    with preload.preloaded_kernels(print, sandbox.Sandbox()):
        NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = nb.cells[0].outputs[0].text
    assert "add_key -1 1" in text and "environ 0 False" in text, text  # EPERM is 1
    assert "ATTN_TEST_SECRET" not in preload.zygote_env()
