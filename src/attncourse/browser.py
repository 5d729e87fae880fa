"""Looking at pages in a real browser: the system's headless Chromium, driven by Playwright.

Used by the slide checks, `course screenshots` and the TA-screen tests (formgrader, feedback, report).
Playwright's own browser download is not needed: it drives the Chromium that scripts/setup.sh installs
(`executable_path`). Every request a page makes is recorded, so a test can prove that the offline slides fetch
nothing from the network. `jupyterlab()` serves a folder for RISE and formgrader.
"""
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Dialog

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
VIEWPORT = (1280, 800)  # a projector; the page gets exactly this size


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def is_local(url: str) -> bool:
    return url.startswith(("file:", "data:", "blob:", "http://127.0.0.1", "http://localhost", "ws://127.0.0.1"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Browser:
    """One headless Chromium page. `requests` lists every URL the page asked for; `dialogs` every alert,
    confirm, prompt or "leave this page?" a page opened (a script that ran)."""

    def __init__(self, executable: str | None = None, viewport: tuple[int, int] = VIEWPORT) -> None:
        from playwright.sync_api import sync_playwright
        exe = executable or find_chromium()
        if not exe:
            raise FileNotFoundError("找不到 Chromium：请运行 scripts/setup.sh（apt 包 chromium）")
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=exe, args=FLAGS)
        self.page = self._browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("dialog", self._dialog)

    @contextlib.contextmanager
    def offline(self) -> Iterator["Browser"]:
        """Requests that leave this machine fail while inside, as on a campus without internet."""
        self.page.route("**/*", lambda route: route.continue_() if is_local(route.request.url) else route.abort())
        try:
            yield self
        finally:
            self.page.unroute("**/*")

    def _dialog(self, dialog: "Dialog") -> None:
        self.dialogs.append(dialog.message)
        # "Leave this page?" (JupyterLab asks while its status is dirty) is accepted, as Playwright does without a
        # handler (microsoft/playwright#8770): dismissed, it cancels the next `goto` (net::ERR_ABORTED)
        if dialog.type == "beforeunload":
            dialog.accept()
        else:
            dialog.dismiss()

    def wait(self, seconds: float) -> None:
        """Real time passes (pages with MathJax or a RISE kernel need it); events are still handled."""
        self.page.wait_for_timeout(seconds * 1000)

    def open(self, url: str, settle: float = 3.0) -> None:
        self.page.goto(url)
        self.wait(settle)

    def evaluate(self, expression: str, arg: Any = None) -> Any:
        """The value of a JavaScript expression, or of a function called with `arg`."""
        return self.page.evaluate(expression, arg)

    def screenshot(self, path: str | os.PathLike[str]) -> Path:
        self.page.screenshot(path=str(path))
        return Path(path)

    def close(self) -> None:
        try:
            self._browser.close()
        finally:
            self._playwright.stop()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def jupyterlab(root_dir: str | os.PathLike[str], token: str = "", extra: Iterable[str] = (),
               python: str = sys.executable, env: dict[str, str] | None = None) -> Iterator[str]:
    """Serve `root_dir` with JupyterLab (a free port) and yield its URL; decks open in RISE at
    `<url>/rise/<path>`, formgrader at `<url>/formgrader`. JupyterLab writes checkpoints next to what it opens,
    so serve a scratch copy. `python` and `env`: another environment's JupyterLab (a student's)."""
    port, home = free_port(), tempfile.mkdtemp(prefix="lab-")
    proc = subprocess.Popen([python, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--allow-root",
                             f"--ServerApp.token={token}", "--ServerApp.password=",
                             f"--ServerApp.root_dir={root_dir}", *extra],
                            cwd=root_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {}), "JUPYTER_RUNTIME_DIR": home})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
