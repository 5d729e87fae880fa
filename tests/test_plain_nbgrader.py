"""Plain nbgrader commands keep working on the course as shipped, and grade like the course's path."""
import csv
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from attncourse.grading import commands
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.course import nbgrader_config

from conftest import copy_course

pytestmark = pytest.mark.slow


def nbgrader(root, *args):
    exe = str(Path(sys.executable).parent / "nbgrader")
    run = subprocess.run([exe, *args], cwd=root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run


def test_generate_autograde_feedback_export(tmp_path, assignment_ids):
    root = copy_course(tmp_path)
    aid = assignment_ids[0]
    nbgrader(root, "generate_assignment", aid, "--force")
    catalog = load_catalog(root, aid)
    rel = nbformat.read(root / "release" / aid / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    bug = next(v for v in catalog.VARIANTS if not v.get("needs_cuda") and v["caught_by"])
    for student, nb in {"alice": answered(rel, source_notebook(root, aid, catalog)),
                        "bob": answered(rel, source_notebook(root, aid, catalog), bug.get("cells"),
                                             bug.get("edits"))}.items():
        (root / "submitted" / student / aid).mkdir(parents=True)
        nbformat.write(nb, root / "submitted" / student / aid / f"{catalog.NOTEBOOK}.ipynb")
    nbgrader(root, "autograde", aid)
    nbgrader(root, "generate_feedback", aid)
    nbgrader(root, "export", "--to", "grades_plain.csv")  # the course's LMS export plugin (nbgrader_config.py)
    with open(root / "grades_plain.csv", encoding="utf-8-sig") as f:
        plain = {row["学号"]: float(row[aid]) for row in csv.DictReader(f)}
    assert set(plain) == {"alice", "bob"}
    assert plain["alice"] > plain["bob"]
    html = (root / "feedback" / "bob" / aid / f"{catalog.NOTEBOOK}.html").read_text(encoding="utf-8")
    assert "BEGIN HIDDEN TESTS" not in html and 'class="verdict fail"' in html

    # the course's path on a fresh copy gives the same score, cell by cell
    other = copy_course(tmp_path / "course_path")
    nbgrader(other, "generate_assignment", aid, "--force")
    (other / "submitted").mkdir()
    for student in ("alice", "bob"):
        subprocess.run(["cp", "-r", str(root / "submitted" / student), str(other / "submitted" / student)], check=True)
    outcomes = commands.grade_submissions(nbgrader_config(other), [(aid, "alice"), (aid, "bob")], jobs=2,
                                     warn=lambda _: None)
    for o in outcomes:
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            cells = {g.cell.name: g.score for nb in gb.find_submission(aid, o.student).notebooks for g in nb.grades}
        assert {c: s for c, (s, _) in o.cells.items()} == cells, o.student
