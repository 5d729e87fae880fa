"""A Dask cluster on this machine, started as an instructor starts one by hand (`dask scheduler`, `dask worker`):
for trying `course grade --cluster`, for its tests and for the throughput benchmark."""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from distributed import Client

from ..run import certificates as certs

DASK = os.path.join(os.path.dirname(sys.executable), "dask")


class LocalCluster:
    """A scheduler and `workers` worker processes (no nanny: a killed worker stays dead) of `threads` threads."""

    def __init__(self, workers: int = 2, threads: int = 1, timeout: float = 120, certificates: Path | None = None) -> None:
        """`certificates`: a folder made by `course cluster-certs`: TLS with mutual authentication everywhere."""
        self.folder = Path(tempfile.mkdtemp(prefix="attncourse-dask-"))
        file = self.folder / "scheduler.json"
        quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        # the workers share this machine's cores: their kernels split them (see run/cluster.py's GradingWorker)
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // (workers * threads)))}
        self.certificates = certificates
        scheduler_tls = ["--protocol", "tls", *certs.command_line(certificates, "scheduler")] if certificates else []
        self.scheduler = subprocess.Popen([DASK, "scheduler", "--scheduler-file", str(file), "--port", "0",
                                           "--host", "127.0.0.1", "--no-dashboard", *scheduler_tls], **quiet)
        self.workers: list[subprocess.Popen[bytes]] = []
        try:
            deadline = time.time() + timeout
            while not file.exists() or not file.read_text():
                if time.time() > deadline or self.scheduler.poll() is not None:
                    raise RuntimeError("dask scheduler did not start")
                time.sleep(0.1)
            self.address = json.loads(file.read_text())["address"]
            worker_tls = certs.command_line(certificates, "worker") if certificates else []
            self.workers = [self.start_worker(f"w{i}", threads, env, worker_tls) for i in range(workers)]
            self.client = Client(self.address, timeout=timeout, set_as_default=False,
                                 security=certs.security(certificates) if certificates else None)
            self.client.wait_for_workers(workers, timeout=timeout)
        except BaseException:
            self.close()
            raise

    def start_worker(self, name: str, threads: int = 1, env: dict[str, str] | None = None,
                     options: list[str] | None = None) -> "subprocess.Popen[bytes]":
        """A `dask worker` for this scheduler, with `options` (its certificates, or none)."""
        return subprocess.Popen([DASK, "worker", self.address, "--nthreads", str(threads), "--no-nanny",
                                 "--no-dashboard", "--name", name, *(options or [])], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def worker_pids(self) -> dict[str, int]:
        """{worker address: pid}"""
        pids: dict[str, int] = self.client.run(os.getpid)
        return pids

    def close(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close(timeout=5)
        for proc in [*self.workers, self.scheduler]:
            proc.kill()
            proc.wait()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
