"""Looking at slides in a real browser: headless Chromium driven through the DevTools protocol.

Used by the slide tests and by `course screenshot`. Records every request the page makes, so a test
can prove the offline slides fetch nothing from the network.
"""
import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,800"]


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
    def __init__(self, executable=None):
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
        while time.time() < end:
            self.call("Runtime.evaluate", expression="1")
            time.sleep(0.25)

    def open(self, url, settle=3.0):
        self.call("Page.navigate", url=url)
        self.wait(settle)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    KEYS = {"ArrowRight": 39, "ArrowDown": 40, "Space": 32, "PageDown": 34}

    def press(self, key, times=1, pause=0.3):
        """Send a key to the page, e.g. to advance reveal.js or RISE slides."""
        code = self.KEYS[key]
        for _ in range(times):
            for kind in ("rawKeyDown", "keyUp"):
                self.call("Input.dispatchKeyEvent", type=kind, key=key if key != "Space" else " ",
                          code=key, windowsVirtualKeyCode=code, nativeVirtualKeyCode=code)
            self.wait(pause)

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
