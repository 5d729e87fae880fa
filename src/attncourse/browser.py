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
from pathlib import Path

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
VIEWPORT = (1280, 800)  # a projector; the page gets exactly this size


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """One headless Chromium page. `requests` lists every URL the page asked for; `dialogs` every alert,
    confirm or prompt a page opened (a script that ran)."""

    def __init__(self, executable=None, viewport=VIEWPORT):
        from playwright.sync_api import sync_playwright
        exe = executable or find_chromium()
        if not exe:
            raise FileNotFoundError("找不到 Chromium：请运行 scripts/setup.sh（apt 包 chromium）")
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=exe, args=FLAGS)
        self.page = self._browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        self.requests, self.dialogs = [], []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def wait(self, seconds):
        """Real time passes (pages with MathJax or a RISE kernel need it); events are still handled."""
        self.page.wait_for_timeout(seconds * 1000)

    def open(self, url, settle=3.0):
        self.page.goto(url)
        self.wait(settle)

    def evaluate(self, expression):
        return self.page.evaluate(expression)

    def screenshot(self, path):
        self.page.screenshot(path=str(path))
        return Path(path)

    def close(self):
        try:
            self._browser.close()
        finally:
            self._playwright.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def jupyterlab(root_dir, token="", extra=(), python=sys.executable, env=None):
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
