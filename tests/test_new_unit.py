"""`course new-unit` gives a skeleton that releases and passes its own tests, and whose catalog the schema check
reads, listing exactly what the author still owes."""
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from attncourse.grading.authoring.variants import catalog_problems, load_catalog, source_notebook
from attncourse.grading.course import nbgrader_config
from attncourse.grading.release import student_version
from attncourse.notebooks import tidy

from conftest import copy_course


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("new_unit"))
    run = subprocess.run([sys.executable, "-m", "attncourse.cli", "--root", str(root), "new-unit", "a9_window",
                          "--title", "窗口注意力"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    return root


def test_files_are_written_tidy(course):
    decks = sorted((course / "notebooks").glob("*_window.ipynb"))  # numbered after the course's own decks
    written = [course / "source" / "a9_window" / "window.ipynb", course / "catalog" / "a9_window.py", *decks]
    assert len(decks) == 1 and all(p.is_file() for p in written)
    assert not [p for p in written if p.suffix == ".ipynb" and tidy(p, write=False)]


def test_it_refuses_to_overwrite(course):
    again = subprocess.run([sys.executable, "-m", "attncourse.cli", "--root", str(course), "new-unit", "a9_window",
                            "--title", "x"], capture_output=True, text=True)
    assert again.returncode != 0 and "不会覆盖" in again.stderr


def test_the_skeleton_releases_without_a_leak(course):
    student_version.release(nbgrader_config(course), course, "a9_window", say=lambda _: None)
    released = nbformat.read(course / "release" / "a9_window" / "window.ipynb", as_version=4)
    assert any("NotImplementedError" in c.source for c in released.cells)


def test_the_catalog_check_lists_what_is_owed(course):
    catalog = load_catalog(course, "a9_window")
    problems = catalog_problems(catalog, source_notebook(course, "a9_window", catalog))
    assert any("LECTURER" in p for p in problems) and any("at least 8" in p for p in problems)
    assert any("'test_scale_scores' has no variant" in p for p in problems)


@pytest.mark.slow
def test_the_skeleton_passes_its_own_tests(course):
    nb = nbformat.read(course / "source" / "a9_window" / "window.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
