"""A grading kernel forked from the preloading process (preload.py): ipykernel's, with two steps fewer.

ipykernel's IPythonKernel lists, as it starts, the file of every loaded module for its debugger, which no grading
kernel has a client for. In a fork of the preloading process, where torch and d2l have loaded about 3,700 modules,
reading each module's `__file__` writes to its object's reference count, and the kernel copies every memory page it
shares with the preloading process that those objects are on. Over the demo class, a kernel's
`IPKernelApp.initialize` took 65 ms and 10,700 page faults with it, 48 ms and 6,800 without.

`ForkedKernel` is IPythonKernel as ipykernel makes it where debugpy is not installed (no `debugger`). Its `__init__`
is ipykernel 7.4.0's without the module list, the debugger and macOS's App Nap switch (the preloading process runs
on Linux only); tests/test_internals.py fingerprints the original.

IPython also saved each cell's input to an SQLite file in the kernel's home, which nothing reads after the kernel
ends: 0.5 ms of the kernel's CPU per cell. The kernel keeps its history in memory only (`In`, `_i`, `%history` of
this session work as before).
"""
import os
from typing import Any

import comm
from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel
from traitlets import HasTraits
from traitlets.config import Config


class ForkedKernel(IPythonKernel):
    def __init__(self, **kwargs: Any) -> None:
        Kernel.__init__(self, **kwargs)  # type: ignore[no-untyped-call]  # IPythonKernel's is the rest, copied
        self.shell = self.shell_class.instance(parent=self, profile_dir=self.profile_dir, user_module=self.user_module,
                                               user_ns=self.user_ns, kernel=self, compiler_class=self.compiler_class)
        self.shell.displayhook.session = self.session
        jupyter_session_name = os.environ.get("JPY_SESSION_NAME")
        if jupyter_session_name:
            self.shell.user_ns["__session__"] = jupyter_session_name
        self.shell.displayhook.pub_socket = self.iopub_socket
        self.shell.displayhook.topic = self._topic("execute_result")  # type: ignore[no-untyped-call]
        self.shell.display_pub.session = self.session
        self.shell.display_pub.pub_socket = self.iopub_socket
        self.comm_manager = comm.get_comm_manager()
        assert isinstance(self.comm_manager, HasTraits)
        self.shell.configurables.append(self.comm_manager)
        for msg_type in ("comm_open", "comm_msg", "comm_close"):
            self.shell_handlers[msg_type] = getattr(self.comm_manager, msg_type)


def run(argv: list[str]) -> None:
    """Start the kernel of a connection file, as `python -m ipykernel_launcher ARGV` does, and serve until it ends."""
    app = IPKernelApp.instance(kernel_class=ForkedKernel, config=Config({"HistoryManager": {"enabled": False}}))
    app.initialize(argv)
    app.start()
