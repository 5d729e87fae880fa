"""Every course command obeys nbgrader's folder settings: a course whose `nbgrader_config.py` moves the source,
release, submitted, autograded and feedback folders is released, collected, graded, reviewed, fed back, reported
and exported with each folder where the settings say, and nothing is written under nbgrader's default names."""
import csv
import shutil

import nbformat
import pytest

from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook

from conftest import copy_course, course

pytestmark = pytest.mark.slow

A1 = "a1_scoring"
MOVED = {"source": "sources", "release": "handout", "submitted": "handed_in", "autograded": "graded",
         "feedback": "returned"}


def test_moving_each_folder_setting_moves_every_command(tmp_path):
    root = copy_course(tmp_path / "course")
    shutil.rmtree(root / "release")
    (root / "source").rename(root / MOVED["source"])
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write("\n".join(f"c.CourseDirectory.{name}_directory = {folder!r}" for name, folder in MOVED.items()) + "\n")
    course(root, "release", A1)
    assert (root / "handout" / A1 / "scoring.ipynb").is_file()
    catalog = load_catalog(root, A1)
    rel = nbformat.read(root / "handout" / A1 / "scoring.ipynb", as_version=4)
    src = source_notebook(root, A1, catalog)
    download = tmp_path / "download"
    for student, nb in (("2023000001", answered(rel, src)), ("2023000002", rel)):
        (download / f"{student}_学生").mkdir(parents=True)
        nbformat.write(nb, download / f"{student}_学生" / "scoring.ipynb")
    course(root, "collect", str(download), "--assignment", A1)
    assert sorted(p.name for p in (root / "handed_in").iterdir()) == ["2023000001", "2023000002"]
    graded = course(root, "grade", A1).stdout
    assert "2023000001" in graded and (root / "graded" / "2023000001" / A1 / "scoring.ipynb").is_file()
    course(root, "review")
    course(root, "feedback")
    assert (root / "returned" / "2023000001" / A1 / "scoring.html").is_file()
    course(root, "report")
    course(root, "export", "--to", "build/lms.csv")
    with open(root / "build" / "lms.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"2023000001", "2023000002"} and float(rows["2023000001"][A1]) > 0
    left = [name for name in MOVED if (root / name).exists()] + [f"{name}_earlier" for name in ("submitted",)
                                                                 if (root / f"{name}_earlier").exists()]
    assert left == [], f"written under nbgrader's default names: {left}"
