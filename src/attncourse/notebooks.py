"""Keeping notebooks clean: no outputs, minimal metadata, title slides from `course.toml`, RISE settings in decks."""
import json
import os
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from .config import find_root, title_slide

KEEP_NB_METADATA = ("kernelspec", "language_info", "celltoolbar", "rise")
KEEP_CELL_METADATA = ("slideshow", "nbgrader", "tags")
TITLE_TAG = "course-title"
# RISE settings written into every deck: `scroll` lets a slide that is still too tall scroll instead of being cut off;
# slides start at the top (not centred: a plot that appears after running a cell would push the title off) and
# are numbered; the "white" theme loads its font from RISE itself (the "simple" one asks Google Fonts, which a
# lecture hall without network does not reach).
# Size: reveal.js lays a slide out at SLIDE_SIZE and scales it to fill the screen less `margin` (its own default,
# 0.04): 1.6× on a 1280×800 projector, so JupyterLab's 14 px text is drawn at 22.4 px, code at 20.8 px, tables
# at 19.2 px; a bigger screen scales further (up to reveal's maxScale, 2×). The offline slides use the same size.
SLIDE_SIZE = (768, 480)
RISE = {"autolaunch": False, "scroll": True, "theme": "white", "transition": "none", "center": False,
        "slideNumber": True, "enable_chalkboard": False, "width": str(SLIDE_SIZE[0]), "height": str(SLIDE_SIZE[1]),
        "margin": 0.04}
DECKS = "notebooks"  # the folder of the lecture decks
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def clean(nb: NotebookNode) -> NotebookNode:
    """Strip outputs, execution counts and metadata the course does not use. Returns `nb`."""
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEEP_NB_METADATA}
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in KEEP_CELL_METADATA}
        cell.pop("attachments", None) if not cell.get("attachments") else None
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def stamp_title(nb: NotebookNode, root: str | Path | None = None) -> NotebookNode:
    """Rewrite the cell tagged `course-title` from its <h1> text and the `course.toml` of `root`."""
    for cell in nb.cells:
        if TITLE_TAG in cell.metadata.get("tags", []):
            src = cell.source
            title = src.split("<h1>", 1)[1].split("</h1>", 1)[0] if "<h1>" in src else src.strip("# \n")
            cell.source = title_slide(title, root)
    return nb


def dumps(nb: NotebookNode) -> str:
    return json.dumps(nb, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def tidied(text: str, path: str | os.PathLike[str], root: str | Path | None = None) -> str:
    """The committed form of a notebook's text: cleaned, titled from `root`'s course.toml (default: found from
    `path`), with the RISE settings when it is a deck."""
    path = Path(path).resolve()
    nb = stamp_title(clean(nbformat.reads(text, as_version=4)), root or find_root(path.parent))
    if path.parent.name == DECKS:
        nb.metadata["rise"] = dict(RISE)
    return dumps(nb)


def tidy(path: str | os.PathLike[str], write: bool = True, root: str | Path | None = None) -> bool:
    """Clean and stamp one notebook file; return True if it changed."""
    path = Path(path).resolve()
    before = path.read_text(encoding="utf-8")
    after = tidied(before, path, root)
    if write and after != before:
        path.write_text(after, encoding="utf-8")
    return after != before


def decks(root: str | os.PathLike[str]) -> list[Path]:
    """The lecture decks, in order."""
    return sorted((Path(root) / DECKS).glob("*.ipynb"))


def course_notebooks(root: str | os.PathLike[str]) -> list[Path]:
    """Notebooks the course authors: decks and assignment sources (release/ is nbgrader's output)."""
    root = Path(root)
    return sorted(p for folder in (DECKS, "source")
                  for p in (root / folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
