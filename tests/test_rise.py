"""The decks as the lecturer presents them in RISE: every code cell is on a slide, RISE settings are written.

The browser checks of RISE (each deck opens as a slideshow, JupyterLab's add-cell bar stays off the slides,
every slide fits 1280×800 and is legible) are in `test_slide_fit.py`, which serves the decks with JupyterLab once;
its synthetic deck has no RISE metadata, so it shows the environment's defaults at work.
"""
import json
import sys
from pathlib import Path

import nbformat
import pytest

from attncourse.notebooks import RISE, decks

from conftest import ROOT

DECKS = decks(ROOT)
HIDDEN = ("skip", "notes")  # slide types RISE does not show, so a lecturer never runs their code


@pytest.mark.parametrize("deck", DECKS, ids=[d.name for d in DECKS])
def test_slideshow_runs_every_code_cell(deck):
    """Presenting runs only the code RISE shows. With no code hidden, the slideshow runs what `test_notebooks`
    executes top to bottom on a fresh kernel, imports included."""
    nb = nbformat.read(deck, as_version=4)
    hidden = [i for i, c in enumerate(nb.cells)
              if c.cell_type == "code" and c.metadata.get("slideshow", {}).get("slide_type") in HIDDEN]
    assert not hidden, f"{deck.name}: code cells {hidden} are hidden from the slideshow and never run there"
    assert nb.metadata.get("rise") == RISE, f"{deck.name}: run `course tidy` to write the RISE settings"


def test_environment_defaults_are_the_decks_settings():
    """scripts/setup.sh writes the decks' RISE settings (slide size and margin included) as JupyterLab's defaults,
    so a notebook without them (a new deck before `course tidy`) is presented the same way."""
    overrides = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert overrides.is_file(), f"{overrides} is missing: run scripts/setup.sh"
    assert json.loads(overrides.read_text())["jupyterlab-rise:plugin"] == RISE, "run scripts/setup.sh again"
