"""Kernels started by the course's own tools (deck execution, grading) keep their log off the console."""
import subprocess
from typing import Any

from jupyter_core.utils import run_sync


class QuietKernel:
    """Mixin for nbclient clients: the kernel's own log (e.g. ipykernel's TCP notice) stays off the
    console. Cell output, the student's prints included, reaches the notebook through IOPub as usual."""

    async def async_start_new_kernel(self, **kwargs: Any) -> Any:
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        return await super().async_start_new_kernel(**kwargs)  # type: ignore[misc]  # a mixin: nbclient's is next

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync twin at class level
