"""The decks as the lecturer presents them: RISE in JupyterLab, looked at in headless Chromium."""
import nbformat
import pytest

from attncourse.browser import Browser, jupyterlab
from attncourse.notebooks import RISE, decks
from attncourse.slides import open_deck, rise_copy
from conftest import ROOT

DECKS = decks(ROOT)
HIDDEN = ("skip", "notes")  # slide types RISE does not show, so a lecturer never runs their code


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with jupyterlab(rise_copy(ROOT, tmp_path_factory.mktemp("course"))) as url:
        yield url


@pytest.mark.parametrize("deck", DECKS, ids=[d.name for d in DECKS])
def test_slideshow_runs_every_code_cell(deck):
    """Presenting runs only the code RISE shows. With no code hidden, the slideshow runs what `test_notebooks`
    executes top to bottom on a fresh kernel, imports included."""
    nb = nbformat.read(deck, as_version=4)
    hidden = [i for i, c in enumerate(nb.cells)
              if c.cell_type == "code" and c.metadata.get("slideshow", {}).get("slide_type") in HIDDEN]
    assert not hidden, f"{deck.name}: code cells {hidden} are hidden from the slideshow and never run there"
    assert nb.metadata.get("rise") == RISE, f"{deck.name}: run `course tidy` to write the RISE settings"


@pytest.mark.parametrize("deck", DECKS, ids=[d.name for d in DECKS])
def test_deck_opens_as_rise_slideshow(lab, deck, tmp_path):
    with Browser() as browser:
        open_deck(browser, f"{lab}/rise/notebooks/{deck.name}")
        sections = browser.evaluate("document.querySelectorAll('.reveal .slides section').length")
        title = browser.evaluate("(document.querySelector('.course-title h1') || {}).textContent")
        # JupyterLab's "Click to add a cell." button stays behind when RISE moves the cells into slides
        # and would cover the slide titles; notebooks/rise.css hides it.
        footer = browser.evaluate("[...document.querySelectorAll('.jp-Notebook-footer')]"
                                  ".filter(f => f.getBoundingClientRect().height > 0).length")
        browser.screenshot(tmp_path / f"{deck.stem}.png")
        assert sections >= 10, f"{deck.name}: RISE shows {sections} slides"
        assert title, f"{deck.name}: the title slide did not render"
        assert footer == 0, f"{deck.name}: the “Click to add a cell.” bar is on the slides"
