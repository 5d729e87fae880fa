"""Executing the decks and writing offline HTML slides (reveal.js and MathJax from local copies)."""
import copy
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from nbclient import NotebookClient
from nbconvert import SlidesExporter
from nbformat import NotebookNode

from .kernels import QuietKernel
from .notebooks import SLIDE_SIZE

if TYPE_CHECKING:
    from .browser import Browser

PathLike = str | os.PathLike[str]


class QuietClient(QuietKernel, NotebookClient):
    pass


TEMPLATES = Path(__file__).parent / "templates"
# Local copies installed from the npm registry by the setup (`npm install` in build/vendor).
VENDOR_PACKAGES = {"reveal.js": ["dist", "plugin"], "mathjax": ["MathJax.js", "config", "extensions", "fonts",
                                                                 "jax", "localization"],
                   "requirejs": ["require.js"], "jquery": ["dist"]}


def execute(path: PathLike, timeout: int = 120) -> tuple[NotebookNode, float]:
    """Run a notebook top to bottom in its own folder; returns (executed notebook, seconds)."""
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    QuietClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    return nb, time.time() - start


def copy_vendor(node_modules: PathLike, out_dir: PathLike) -> None:
    """Copy the parts of reveal.js, MathJax, require.js and jQuery that the slides load."""
    for package, parts in VENDOR_PACKAGES.items():
        for part in parts:
            src, dst = Path(node_modules) / package / part, Path(out_dir) / "vendor" / package / part
            if not src.exists():
                raise FileNotFoundError(f"{src} 不存在：请先运行安装脚本（npm 安装 reveal.js 与 MathJax）")
            if dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)


def exporter() -> SlidesExporter:
    return SlidesExporter(
        template_name="course_reveal", extra_template_basedirs=[str(TEMPLATES)],
        reveal_url_prefix="vendor/reveal.js", reveal_theme="white", reveal_transition="none",
        reveal_scroll=True, reveal_number="c/t", reveal_width=str(SLIDE_SIZE[0]), reveal_height=str(SLIDE_SIZE[1]),
        mathjax_url="vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        require_js_url="vendor/requirejs/require.js", jquery_url="vendor/jquery/dist/jquery.min.js",
        font_awesome_url="", embed_images=True)


def build_slides(root: PathLike, out_dir: PathLike, node_modules: PathLike,
                 say: Callable[[str], object] = print) -> None:
    """Execute every deck and write its offline slides into `out_dir` (with the vendor files they load)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    copy_vendor(node_modules, out_dir)
    for deck in sorted((Path(root) / "notebooks").glob("*.ipynb")):
        nb, seconds = execute(deck)
        target = write_slides(nb, deck, out_dir)
        say(f"  ✔ {deck.name}: {seconds:.1f} s → {target.relative_to(root)}")


def write_slides(executed_nb: NotebookNode, deck_path: PathLike, out_dir: PathLike) -> Path:
    """`<out_dir>/<deck>.slides.html`, images embedded, scripts from `<out_dir>/vendor/`."""
    # nbconvert embeds only images below the path it is given: point it at the course root and
    # make the decks' `../img/` links relative to that.
    nb = copy.deepcopy(executed_nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace("](../img/", "](img/").replace('src="../img/', 'src="img/')
    root = Path(deck_path).resolve().parent.parent
    body, _ = exporter().from_notebook_node(nb, resources={"metadata": {"path": str(root)}})
    target = Path(out_dir) / (Path(deck_path).stem + ".slides.html")
    target.write_text(body, encoding="utf-8")
    return target


# --- Does every slide fit the screen? -------------------------------------------------------------------
# Reveal.js (offline HTML and RISE alike) nests each vertical slide in its horizontal one. The walk opens
# every slide through the URL hash with all its fragments shown (`#/h/v/99`), then measures the laid-out
# cells: a slide fits when its content lies within the viewport, top to bottom, and no text or picture is
# cut off at the right (by the screen, or by a code box that clips or scrolls it).
SHAPE_JS = ("JSON.stringify([...document.querySelectorAll('.reveal .slides > section')]"
            ".map(s => Math.max(1, s.querySelectorAll(':scope > section').length)))")
# Measure once the slide has settled: the offline slides typeset their formulas with MathJax 2 when a slide is
# shown (RISE typesets them all at load), so wait until every formula is rendered and two measurements agree.
MEASURE_JS = r"""async ([h, v]) => {
  // Open slide h/v with all its fragments shown (`#/h/v/99`) and wait until it is the one shown. RISE rewrites
  // the hash of the slide it shows; a rewrite for the last slide can land after ours and undo it, so set it again.
  const shown = () => {
    const stack = document.querySelectorAll('.reveal .slides > section')[h];
    const slide = stack && (stack.querySelectorAll(':scope > section')[v] || stack);
    return slide && stack.classList.contains('present') && slide.classList.contains('present')
           && !slide.querySelector('.fragment:not(.visible)') ? slide : null;
  };
  for (let i = 0; i < 200 && !(i && shown()); i++) {
    if (i % 20 === 0) location.hash = `#/${h}/${v}/99`;
    await new Promise(done => setTimeout(done, 25));
  }
  const slide = shown();
  if (!slide) throw new Error(`slide ${h}/${v} was not shown after 5 s`);
  const frame = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  // How far past its right edge is `el` drawn: past the screen, or past a box that clips or scrolls it?
  const cut = (el, rects) => {
    let right = window.innerWidth;
    for (let e = el; e && e !== document.body; e = e.parentElement)
      if (getComputedStyle(e).overflowX !== 'visible') right = Math.min(right, e.getBoundingClientRect().right);
    return Math.max(0, ...[...rects].filter(r => r.width > 0).map(r => r.right - right));
  };
  const measure = () => {
    const rects = [...slide.children].map(c => c.getBoundingClientRect()).filter(r => r.height > 0);
    // Text (a long code line) and pictures that are cut off or hidden in a scroll box at the right.
    const widest = [...slide.querySelectorAll('img, svg, canvas')].map(e => cut(e, [e.getBoundingClientRect()]));
    const texts = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT), range = document.createRange();
    for (let t = texts.nextNode(); t; t = texts.nextNode()) {
      if (!t.textContent.trim() || t.parentElement.closest('.MJX_Assistive_MathML, mjx-assistive-mml')) continue;
      range.selectNodeContents(t);
      widest.push(cut(t.parentElement, range.getClientRects()));
    }
    return {top: Math.min(...rects.map(r => r.top)), bottom: Math.max(...rects.map(r => r.bottom)),
            cut: Math.max(0, ...widest), ...fonts()};
  };
  // The smallest text of each kind as the eye sees it: the computed font size times the scale reveal.js draws
  // the slide at (a CSS transform or zoom; the ratio of the slide's drawn width to its laid-out width holds both).
  const fonts = () => {
    const scale = slide.getBoundingClientRect().width / slide.offsetWidth, least = {body: null, code: null, table: null};
    const texts = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT), range = document.createRange();
    for (let t = texts.nextNode(); t; t = texts.nextNode()) {
      const el = t.parentElement;
      if (!t.textContent.trim() || el.closest('.MathJax_CHTML, .MathJax, mjx-container, svg')) continue;
      range.selectNodeContents(t);
      if (![...range.getClientRects()].some(r => r.width > 0)) continue;  // not drawn
      const kind = el.closest('td, th') ? 'table' : el.closest('pre, code, .cm-content') ? 'code'
                   : el.closest('p, li') ? 'body' : null;
      const px = parseFloat(getComputedStyle(el).fontSize) * scale;
      if (kind && (least[kind] === null || px < least[kind])) least[kind] = Math.round(px * 10) / 10;
    }
    return least;
  };
  const ready = () => {
    const math = [...slide.querySelectorAll('.MathJax_CHTML')];
    return document.fonts.status === 'loaded' && math.every(m => getComputedStyle(m).visibility === 'visible')
           && math.length >= slide.querySelectorAll('script[type^="math/tex"]').length;
  };
  let last = null, now = null;
  for (let i = 0; i < 50 && !(last && JSON.stringify(last) === JSON.stringify(now)); i++) {
    await new Promise(done => setTimeout(done, 50));
    await frame();
    [last, now] = ready() ? [now, measure()] : [null, null];
  }
  const heading = slide.querySelector('h1, h2, h3');
  return JSON.stringify({title: heading ? heading.innerText.replace("¶", "").replace(/\s+/g, " ").trim() : "", ...(now || measure()),
                         width: window.innerWidth, viewport: window.innerHeight,
                         frame: document.querySelector('.reveal .slides').getBoundingClientRect().height});
}"""


# The smallest text legible from the back row of a lecture hall, in screen px at 1280×800 (issue 28).
LEGIBLE_PX = {"body": 22, "code": 20, "table": 18}
KIND_NAMES = {"body": "正文", "code": "代码", "table": "表格"}


@dataclass
class SlideFit:
    deck: str
    h: int
    v: int
    title: str
    top: float
    bottom: float
    cut: float  # px of text or picture cut off (or scrolled out of sight) at the right
    width: int
    viewport: int
    frame: float  # drawn height of the slide area
    body: float | None = None  # smallest font size on screen (px) of paragraph and list text,
    code: float | None = None  # of code (input and output),
    table: float | None = None  # and of table cells; None where the slide has none

    @property
    def height(self) -> int:
        return round(self.bottom - self.top)

    @property
    def fits(self) -> bool:
        return self.top >= 0 and self.bottom <= self.viewport and self.cut <= 1

    @property
    def too_small(self) -> dict[str, float]:
        """{kind: px} of the text kinds drawn smaller than `LEGIBLE_PX`."""
        return {k: getattr(self, k) for k, least in LEGIBLE_PX.items()
                if getattr(self, k) is not None and getattr(self, k) < least}

    @property
    def ok(self) -> bool:
        return self.fits and not self.too_small

    def __str__(self) -> str:
        sizes = "，".join(f"{KIND_NAMES[k]} {getattr(self, k):g} px" for k in LEGIBLE_PX if getattr(self, k) is not None)
        return (f"{self.deck} {self.h}/{self.v} “{self.title}”: 高 {self.height} px，右侧截断 {round(self.cut)} px，"
                f"最小字号 {sizes or '无文字'}（屏幕 {self.width}×{self.viewport}）")


def smallest(fits: list["SlideFit"]) -> dict[str, float]:
    """{kind: smallest px over `fits`} for each kind of text they hold."""
    return {k: min(v for f in fits if (v := getattr(f, k)) is not None)
            for k in LEGIBLE_PX if any(getattr(f, k) is not None for f in fits)}


def open_deck(browser: "Browser", url: str, timeout: float = 90) -> None:
    """Open a deck and wait until reveal.js has laid out its slides (RISE needs a running JupyterLab)."""
    browser.open(url, settle=1)
    deadline = time.time() + timeout
    while not browser.evaluate("document.querySelectorAll('.reveal .slides section.present').length"):
        if time.time() > deadline:
            raise TimeoutError(f"{url}: no slides after {timeout} s")
        browser.wait(1)
    browser.wait(1)


def walk(browser: "Browser", url: str, deck: str, shots: PathLike | None = None,
         failing_only: bool = False) -> list["SlideFit"]:
    """Visit every slide of the deck at `url` with its fragments shown; returns a `SlideFit` per slide and,
    with `shots` (a folder), saves a screenshot `<deck>-<h>-<v>.png` of each (or of each that does not fit)."""
    open_deck(browser, url)
    fits: list[SlideFit] = []
    for h, count in enumerate(json.loads(browser.evaluate(SHAPE_JS))):
        for v in range(count):
            fits.append(SlideFit(deck, h, v, **json.loads(browser.evaluate(MEASURE_JS, [h, v]))))
            if shots and not (failing_only and fits[-1].ok):
                Path(shots).mkdir(parents=True, exist_ok=True)
                browser.screenshot(Path(shots) / f"{Path(deck).name}-{h:02d}-{v}.png")
    return fits


def rise_copy(root: PathLike, dest: PathLike, executed: dict[Path, NotebookNode] | None = None) -> Path:
    """A scratch copy of `notebooks/` (with `rise.css`) and `img/` for JupyterLab to serve; decks in
    `executed` ({path: notebook}) are written with their outputs, as after "Run All"."""
    for name in ("notebooks", "img"):
        shutil.copytree(Path(root) / name, Path(dest) / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for deck, nb in (executed or {}).items():
        nbformat.write(nb, Path(dest) / "notebooks" / Path(deck).name)
    return Path(dest)


def screenshots(root: PathLike, out_dir: PathLike, decks: Iterable[PathLike]) -> list["SlideFit"]:
    """Execute `decks`, then walk every slide in the offline HTML and in RISE (JupyterLab serving the executed
    decks), saving `<out_dir>/{html,rise}/<deck>-<h>-<v>.png`. Returns the `SlideFit`s, HTML first."""
    from .browser import Browser, jupyterlab
    out_dir = Path(out_dir)
    executed = {Path(deck): execute(deck)[0] for deck in decks}
    fits: list[SlideFit] = []
    with Browser() as browser, tempfile.TemporaryDirectory() as scratch:
        pages = Path(scratch) / "html"
        copy_vendor(Path(root) / "build" / "vendor" / "node_modules", pages)
        for deck, nb in executed.items():
            page = write_slides(nb, deck, pages)
            fits += walk(browser, page.as_uri(), f"html/{deck.stem}", shots=out_dir / "html")
        with jupyterlab(rise_copy(root, Path(scratch) / "course", executed)) as lab:
            for deck in executed:
                fits += walk(browser, f"{lab}/rise/notebooks/{deck.name}", f"rise/{deck.stem}", shots=out_dir / "rise")
    return fits
