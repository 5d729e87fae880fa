"""Every slide of every deck fits a 1280×800 projector and is legible from the back row, in the offline HTML and
in RISE (headless Chromium): reveal.js scales the slide to the screen, and the smallest text of each kind, as
drawn, is at least `slides.LEGIBLE_PX` (body 22 px, code 20 px, tables 18 px).

Each slide is measured with its fragments shown and the outputs of its code cells present: the decks are
executed once, and JupyterLab serves the executed notebooks, as RISE shows them after "Run All".
The check itself is tested on a synthetic deck with slides that are too tall, too wide or set in small print.
`course screenshots` walks the same slides and saves a PNG of each for a person to look at.
"""
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from attncourse import slides
from attncourse.browser import Browser, jupyterlab
from attncourse.notebooks import decks

from conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_browser]

DECKS = decks(ROOT)
VIEWS = ["html", "rise"]


def _slide(source, slide_type="slide"):
    return new_markdown_cell(source, metadata={"slideshow": {"slide_type": slide_type}})


def synthetic_deck():
    """Five slides: short; a list far taller than the screen; a short slide whose code fragment prints
    60 lines; a table far wider than the screen; a footnote in small print."""
    long_output = new_code_cell("for i in range(60): print(i)", metadata={"slideshow": {"slide_type": "fragment"}},
                                outputs=[new_output("stream", name="stdout", text="".join(f"{i}\n" for i in range(60)))])
    # Code lines wrap on the slides; a table of unbreakable numbers cannot.
    wide_table = new_code_cell("wide", outputs=[new_output("execute_result", execution_count=1, data={
        "text/html": "<table><tr>" + "".join(f"<td>{10 ** 6 + i}</td>" for i in range(60)) + "</tr></table>"})])
    return new_notebook(cells=[_slide("## 短的一页\n\n- 一行"),
                               _slide("## 太长的一页\n\n" + "".join(f"- 第 {i} 行\n" for i in range(40))),
                               _slide("## 片段里的长输出"), long_output,
                               _slide("## 太宽的表格"), wide_table,
                               _slide("## 小字\n\n正文\n\n<p>正文<sub>脚注</sub></p>")],
                        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


@pytest.fixture(scope="module")
def pages(tmp_path_factory, executed_decks):
    """{(view, deck name): URL} for every deck and the synthetic one, in the offline HTML and in RISE."""
    scratch = tmp_path_factory.mktemp("fit")
    executed = {deck: nb for deck, (nb, _) in executed_decks.items()}
    executed[ROOT / "notebooks" / "zz_synthetic.ipynb"] = synthetic_deck()
    slides.copy_vendor(ROOT / "build" / "vendor" / "node_modules", scratch / "html")
    urls = {("html", deck.stem): slides.write_slides(nb, deck, scratch / "html").as_uri()
            for deck, nb in executed.items()}
    with jupyterlab(slides.rise_copy(ROOT, scratch / "course", executed)) as lab:
        urls.update({("rise", deck.stem): f"{lab}/rise/notebooks/{deck.name}" for deck in executed})
        yield urls


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.mark.parametrize("view", VIEWS)
def test_fit_check_catches_slides_that_are_too_tall(pages, browser, view):
    fits = slides.walk(browser, pages[view, "zz_synthetic"], "zz_synthetic")
    assert [f.fits for f in fits] == [True, False, False, False, True], [str(f) for f in fits]
    assert fits[1].height > fits[1].viewport == 800 and fits[3].cut > 100
    # The same text size is measured in both views: JupyterLab's 14 px drawn 1.6× larger; small print is caught.
    assert fits[0].body == 22.4 and fits[0].code is None and not fits[0].too_small, fits[0]
    assert fits[3].code == 20.8 and fits[3].table is not None, fits[3]
    assert set(fits[4].too_small) == {"body"} and fits[4].body < 20, fits[4]


@pytest.mark.parametrize("deck", DECKS, ids=[d.stem for d in DECKS])
@pytest.mark.parametrize("view", VIEWS)
def test_every_slide_fits_the_screen(pages, browser, view, deck, tmp_path):
    fits = slides.walk(browser, pages[view, deck.stem], f"{view}/{deck.stem}", shots=tmp_path, failing_only=True)
    assert len(fits) >= 10 and fits[0].title, f"{view}: {len(fits)} slides, title “{fits[0].title}”"
    too_big = [str(f) for f in fits if not f.fits]
    assert not too_big, f"slides larger than 1280×800 (screenshots in {tmp_path}):\n" + "\n".join(too_big)
    # Legible from the back row: the slide is scaled to the screen's height and no text is drawn too small.
    assert all(f.frame >= 0.9 * f.viewport for f in fits), f"slide area {fits[0].frame:.0f} px of {fits[0].viewport}"
    assert set(slides.smallest(fits)) >= {"body", "code"}, f"no text measured: {slides.smallest(fits)}"
    small = [str(f) for f in fits if f.too_small]
    assert not small, f"text smaller than {slides.LEGIBLE_PX} px (screenshots in {tmp_path}):\n" + "\n".join(small)
    if view == "rise":
        fonts = [u for u in browser.requests if "fonts.googleapis" in u or "fonts.gstatic" in u]
        assert not fonts, f"RISE asks a font CDN (no network in many lecture halls): {fonts[:3]}"
        # JupyterLab's "Click to add a cell." button stays behind when RISE moves the cells into slides and
        # would cover the slide titles; notebooks/rise.css hides it.
        assert not browser.evaluate("[...document.querySelectorAll('.jp-Notebook-footer')]"
                                    ".some(f => f.getBoundingClientRect().height > 0)"), "the add-cell bar shows"
