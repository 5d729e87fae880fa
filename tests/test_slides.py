"""Offline HTML slides, looked at in a real browser (headless Chromium); and how that browser leaves a page."""
import re

import pytest

from attncourse import slides
from attncourse.browser import Browser

from conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_browser]


@pytest.fixture(scope="module")
def slide_files(tmp_path_factory, executed_decks):
    out = tmp_path_factory.mktemp("slides")
    slides.copy_vendor(ROOT / "build" / "vendor" / "node_modules", out)
    return [slides.write_slides(nb, deck, out) for deck, (nb, _) in executed_decks.items()]


def test_slides_load_nothing_from_a_cdn(slide_files):
    """No script, stylesheet or image comes from the network (links the audience may click are fine)."""
    for html in slide_files:
        text = html.read_text(encoding="utf-8")
        remote = re.findall(r'src="http[^"]*"|<link[^>]*href="http[^"]*"', text)
        assert not remote, f"{html.name}: {remote[:3]}"
        assert "cdn" not in text.lower().split("<body")[0], html.name


def test_slides_render_offline_in_chromium(slide_files, tmp_path):
    with Browser() as browser:
        for html in slide_files:
            browser.requests.clear()
            browser.open(html.as_uri(), settle=4)
            sections = browser.evaluate("document.querySelectorAll('.reveal .slides > section').length")
            math = browser.evaluate("document.querySelectorAll('.MathJax_CHTML, .MathJax').length")
            broken = browser.evaluate("[...document.images].filter(i => !(i.complete && i.naturalWidth > 0))"
                                      ".map(i => i.alt || i.src.slice(0, 40))")
            title = browser.evaluate("document.querySelector('.course-title h1').textContent")
            remote = [u for u in browser.requests if not u.startswith(("file:", "data:"))]
            browser.screenshot(tmp_path / f"{html.stem}.png")
            assert sections >= 10, f"{html.name}: only {sections} slides"
            assert math > 0, f"{html.name}: MathJax rendered nothing"
            assert broken == [], f"{html.name}: images not loaded: {broken}"
            assert title, f"{html.name}: no title slide"
            assert remote == [], f"{html.name}: network requests {remote[:5]}"


def test_a_page_that_asks_before_it_is_left_lets_the_next_page_load(tmp_path):
    """JupyterLab asks "leave this page?" while its status is dirty: Browser leaves, as a person would, so the next
    page opens (dismissing the question cancels that navigation: net::ERR_ABORTED)."""
    asking, nxt = tmp_path / "asking.html", tmp_path / "next.html"
    asking.write_text("<button>x</button><script>addEventListener('beforeunload', e => e.preventDefault())</script>")
    nxt.write_text("<title>next</title>")
    with Browser() as browser:
        browser.open(asking.as_uri(), settle=0.2)
        browser.page.click("button")  # Chromium asks only a page the user has touched
        browser.open(nxt.as_uri(), settle=0.2)
        assert browser.page.title() == "next" and browser.dialogs == [""], browser.dialogs
