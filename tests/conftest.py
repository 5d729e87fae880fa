"""Shared fixtures: a scratch copy of the course, and the catalog graded once per session."""
import os
from pathlib import Path

import nbformat
import pytest

from attncourse.grading.authoring.variants import catalog_cases, load_catalog, source_notebook
from attncourse.grading.cells import has_hidden_tests, test_cell_ids
from attncourse.grading.course import AUTHORED, assignments, copy_course_files, nbgrader_config, use_this_environment
from attncourse.grading.release import student_version as release
from attncourse.grading.run import autograde

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("ATTN_COURSE_DEVICE", "cpu")  # CI has no GPU; on a GPU machine unset it to test CUDA
use_this_environment()


def copy_course(dest):
    """A scratch course with the repo's content and no grading state (the npm assets of setup.sh linked)."""
    dest = copy_course_files(ROOT, dest, (*AUTHORED, "release"))
    (dest / "build").mkdir()
    (dest / "build" / "vendor").symlink_to(ROOT / "build" / "vendor")
    return dest


@pytest.fixture(scope="session")
def assignment_ids():
    return assignments(ROOT)


@pytest.fixture(scope="session")
def catalog_grades(tmp_path_factory, assignment_ids):
    """Autograde, through the course's grading path (sandboxed where possible), one submission per case of
    every catalog: the reference answer, the lecturer's code, the other correct answers and each buggy
    variant. Returns {assignment: {"cases": {student: Outcome}, "variants": [...], "tests": [...],
    "hidden": [...], "correct": [...]}}."""
    root = copy_course(tmp_path_factory.mktemp("catalog_course"))
    cfg = nbgrader_config(root)
    release.release_all(cfg, root, assignment_ids)
    submitted = root / "submitted"
    result, pairs = {}, []
    for aid in assignment_ids:
        catalog = load_catalog(root, aid)
        src = source_notebook(root, aid, catalog)
        cases = catalog_cases(root, aid)
        for student, (nb, _) in cases.items():
            folder = submitted / student / aid
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{catalog.NOTEBOOK}.ipynb")
            pairs.append((aid, student))
        hidden = [c.metadata["nbgrader"]["grade_id"] for c in src.cells if has_hidden_tests(c)]
        variants = [v for v in catalog.VARIANTS if f"bug_{v['id']}" in cases]
        result[aid] = {"variants": variants, "tests": test_cell_ids(src), "hidden": hidden, "cases": {},
                       "correct": [k for k, (_, lost) in cases.items() if not lost and not k.startswith("bug_")]}
    outcomes = autograde.grade_class(nbgrader_config(root, submitted), pairs, jobs=os.cpu_count() or 2,
                                     warn=lambda line: None)
    for o in outcomes:
        result[o.assignment]["cases"][o.student] = o
    return result


def lost_points(outcome, tests):
    """Test cells (among `tests`) where the outcome scored below the maximum."""
    return {cell for cell in tests if outcome.cells[cell][0] < outcome.cells[cell][1]}


@pytest.fixture(scope="session")
def executed_decks():
    """Every deck executed once, top to bottom, on CPU: {path: (executed notebook, seconds)}."""
    from attncourse import slides
    return {deck: slides.execute(deck) for deck in sorted((ROOT / "notebooks").glob("*.ipynb"))}
