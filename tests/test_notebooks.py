"""Committed notebooks: clean, titled from course.toml, images present; decks and sources execute."""
import re

import nbformat
import pytest
from nbclient import NotebookClient

from attncourse.notebooks import course_notebooks, tidy

from conftest import ROOT

ALL_COMMITTED = sorted(p for folder in ("notebooks", "source", "release") for p in (ROOT / folder).rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts)
DECKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOURCES = sorted((ROOT / "source").glob("*/*.ipynb"))
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)|<img[^>]*src=\"([^\"]+)\"")


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def test_there_is_content():
    assert DECKS and SOURCES


@pytest.mark.parametrize("path", ALL_COMMITTED, ids=_ids(ALL_COMMITTED))
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name} carries outputs"


def test_decks_and_sources_are_tidy():
    """`course tidy` would change nothing: minimal metadata, title slides stamped from course.toml."""
    untidy = [str(p.relative_to(ROOT)) for p in course_notebooks(ROOT) if tidy(p, write=False)]
    assert not untidy, f"run `course tidy`: {untidy}"


@pytest.mark.parametrize("path", DECKS + SOURCES, ids=_ids(DECKS + SOURCES))
def test_title_slide_names_the_lecturer(path):
    from attncourse.config import settings
    first = nbformat.read(path, as_version=4).cells[0]
    assert "course-title" in first.metadata.get("tags", [])
    for value in settings(ROOT)["lecturer"].values():
        assert value in first.source


@pytest.mark.parametrize("path", DECKS + SOURCES, ids=_ids(DECKS + SOURCES))
def test_referenced_images_exist(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for link in (a or b for a, b in IMAGE.findall(cell.source)):
            if not link.startswith(("http:", "https:", "data:", "attachment:")):
                assert (path.parent / link).resolve().is_file(), f"{path.name}: missing image {link}"


MAX_LECTURE_CODE_LINES = 15  # AUTHORING.md: a code cell the audience reads on a slide
APPENDIX = re.compile(r"#+\s*附录")


@pytest.mark.parametrize("path", DECKS, ids=_ids(DECKS))
def test_lecture_code_cells_are_short(path):
    """Before the appendix, no code cell is longer than a slide can show legibly."""
    cells = nbformat.read(path, as_version=4).cells
    end = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and APPENDIX.match(c.source)), len(cells))
    code = [c for c in cells[:end] if c.cell_type == "code"]
    assert code, f"{path.name}: no code cells before the appendix"
    long = [(cells.index(c), c.source.splitlines()[0]) for c in code
            if len(c.source.rstrip().splitlines()) > MAX_LECTURE_CODE_LINES]
    assert not long, f"{path.name}: code cells over {MAX_LECTURE_CODE_LINES} lines (split them or move them to the appendix): {long}"


def _execute(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


@pytest.mark.slow
def test_decks_run_top_to_bottom_on_cpu(executed_decks):
    """Executing raises on the first failing cell; live material must also be quick."""
    assert set(executed_decks) == set(DECKS)
    for deck, (_, seconds) in executed_decks.items():
        assert seconds < 300, f"{deck.name} took {seconds:.0f} s"


@pytest.mark.slow
@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_source_passes_its_own_tests(path):
    """The instructor's version, hidden tests included, runs clean."""
    _execute(path)


def test_figures_are_made_by_code_in_the_repo(tmp_path):
    """`course figures` regenerates every committed figure from `attncourse.figures`."""
    from attncourse.figures import write_all
    written = set(write_all(tmp_path))
    committed = {p.name for p in (ROOT / "img").glob("*.svg")}
    assert committed <= written, f"figures without code: {committed - written}"
    stale = [n for n in committed if (tmp_path / n).read_bytes() != (ROOT / "img" / n).read_bytes()]
    assert not stale, f"run `course figures`: {stale}"


@pytest.mark.slow  # git and `course tidy --stdin` run as subprocesses for every deck
def test_presenting_never_dirties_the_committed_decks(tmp_path):
    """RISE autosaves the deck a lecturer runs (outputs, execution counts and times): git's clean filter
    (.gitattributes, configured by scripts/setup.sh) stores the tidy deck, so nothing of it can be committed.
    (`git status` may list the file until `git add` refreshes the index; the diff is empty.)"""
    import shutil
    import subprocess
    import sys

    from nbformat.v4 import new_output
    for name in ("course.toml", ".gitattributes"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    deck = tmp_path / "notebooks" / DECKS[0].name
    shutil.copy(DECKS[0], deck)

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    git("init", "-q")
    git("config", "filter.course-notebook.clean", f"{sys.executable} -m attncourse.cli tidy --stdin %f")
    git("config", "filter.course-notebook.smudge", "cat")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "deck")
    nb = nbformat.read(deck, as_version=4)
    for count, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = count + 1
        cell.outputs = [new_output("stream", name="stdout", text="已运行\n")]
        cell.metadata["execution"] = {"iopub.status.idle": "2026-11-25T10:00:00Z"}
    nb.metadata["widgets"] = {"state": {}}
    nbformat.write(nb, deck)
    assert git("diff", "--stat") == "", "presenting changed what git would commit"
    git("add", "-A")
    assert git("status", "--porcelain") == "" and git("show", f"HEAD:notebooks/{deck.name}") == DECKS[0].read_text(
        encoding="utf-8")
    assert any(c.get("outputs") for c in nbformat.read(deck, as_version=4).cells)  # the working copy keeps them
