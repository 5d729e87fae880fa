"""Looking at slides in a real browser: headless Chromium driven through the DevTools protocol.

Used by the slide tests and by `course screenshots`. Records every request the page makes, so a test
can prove the offline slides fetch nothing from the network. `jupyterlab()` serves a folder so that
the browser can open its decks in RISE.
"""
import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,800"]
VIEWPORT = (1280, 800)  # a projector; the page gets exactly this size (the window alone leaves less)


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
    def __init__(self, executable=None, viewport=VIEWPORT):
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        exe = executable or find_chromium()
        if not exe:
            raise FileNotFoundError("找不到 Chromium：请运行 scripts/setup.sh（apt 包 chromium）")
        self.proc = subprocess.Popen([exe, *FLAGS, f"--remote-debugging-port={self.port}",
                                      f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ws = websocket.create_connection(self._page_ws_url(), timeout=60)
        self._id = 0
        self.requests = []
        self.call("Page.enable")
        self.call("Network.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=viewport[0], height=viewport[1],
                  deviceScaleFactor=1, mobile=False)

    def _page_ws_url(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json") as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError("Chromium did not start")

    def call(self, method, **params):
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Network.requestWillBeSent":
                self.requests.append(msg["params"]["request"]["url"])
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def wait(self, seconds):
        """Real time passes (pages with MathJax or a RISE kernel need it); events are still collected."""
        end = time.time() + seconds
        while True:
            self.call("Runtime.evaluate", expression="1")
            left = end - time.time()
            if left <= 0:
                return
            time.sleep(min(0.25, left))

    def open(self, url, settle=3.0):
        self.call("Page.navigate", url=url)
        self.wait(settle)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def jupyterlab(root_dir):
    """Serve `root_dir` with JupyterLab (no token, a free port) and yield its URL; decks open in RISE at
    `<url>/rise/<path>`. JupyterLab writes checkpoints next to what it opens, so serve a scratch copy."""
    port, home = free_port(), tempfile.mkdtemp(prefix="lab-")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--allow-root",
                             "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root_dir}"],
                            cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "JUPYTER_RUNTIME_DIR": home})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
