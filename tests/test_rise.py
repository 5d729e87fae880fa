"""The decks as the lecturer presents them: RISE in JupyterLab, looked at in headless Chromium."""
import subprocess
import sys
import time
import urllib.request

import pytest

from attncourse.browser import Browser, free_port
from conftest import ROOT, copy_course

DECKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    port = free_port()
    home = tmp_path_factory.mktemp("lab")
    course = copy_course(home / "course")  # JupyterLab writes checkpoints next to what it opens
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--allow-root",
                             "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={course}",
                             "--ServerApp.open_browser=False"], cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**__import__("os").environ, "JUPYTER_RUNTIME_DIR": str(home)})
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.parametrize("deck", DECKS, ids=[d.name for d in DECKS])
def test_deck_opens_as_rise_slideshow(lab, deck, tmp_path):
    with Browser() as browser:
        browser.open(f"{lab}/rise/notebooks/{deck.name}", settle=5)
        for _ in range(60):  # JupyterLab and RISE take real time to start
            if browser.evaluate("document.querySelectorAll('.reveal .slides section').length"):
                break
            browser.wait(1)
        browser.wait(2)
        sections = browser.evaluate("document.querySelectorAll('.reveal .slides section').length")
        title = browser.evaluate("(document.querySelector('.course-title h1') || {}).textContent")
        browser.screenshot(tmp_path / f"{deck.stem}.png")
        assert sections >= 10, f"{deck.name}: RISE shows {sections} slides"
        assert title, f"{deck.name}: the title slide did not render"
