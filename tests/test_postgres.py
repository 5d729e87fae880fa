"""A course whose gradebook is a PostgreSQL server (`c.CourseDirectory.db_url` in nbgrader_config.py) grades a class,
collected from LMS downloads, exactly as one with the embedded SQLite gradebook: the same scores, review decisions,
manual grades, names and export. The server is Debian's PostgreSQL, started here with initdb + pg_ctl in a
temporary folder (a Unix socket, no TCP); psycopg is the driver. Two `course grade` runs on different assignments
share it at once, and the TA grades a written answer in formgrader (Chromium), which reads the same setting.
"""
import csv
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest
from nbgrader.api import Gradebook

from attncourse.browser import Browser, jupyterlab
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import is_answer_cell
from attncourse.grading.course import nbgrader_config

from conftest import copy_course, course

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.needs_browser]

A1, A2 = "a1_scoring", "a2_multihead"
HONEST, HELD, MISTAKE = "2023000001", "2023000002", "2023000003"
NAMES = {HONEST: "张三", HELD: "欧阳娜娜", MISTAKE: "李四"}
TOKEN = "postgres-test"


def _write_downloads(root, folder):
    """An ordinary class as the LMS hands it out, a zip per assignment: a right answer (with a written answer to
    grade by hand), one held for review (an import the grader must look at) and one with a catalogued mistake."""
    zips = {}
    for assignment in (A1, A2):
        catalog = load_catalog(root, assignment)
        src = source_notebook(root, assignment, catalog)
        path = next((root / "release" / assignment).glob("*.ipynb"))
        name, rel = path.name, nbformat.read(path, as_version=4)
        mistake = catalog.VARIANTS[0]
        zips[assignment] = folder / f"{assignment}.zip"
        with zipfile.ZipFile(zips[assignment], "w", zipfile.ZIP_DEFLATED) as z:
            for student, nb in ((HONEST, answered(rel, src)), (HELD, answered(rel, src)),
                                (MISTAKE, answered(rel, src, mistake.get("cells"), mistake.get("edits")))):
                if student == HELD:
                    first = next(c for c in nb.cells if is_answer_cell(c) and c.cell_type == "code")
                    first.source = "import ctypes  # 评分程序要人看一眼的写法\n" + first.source
                z.writestr(f"{student}_{NAMES[student]}_{name}", nbformat.writes(nb))
    return zips


def _grades(db_url):
    """{(assignment, student, cell): (auto, manual, needs a person)} of every grade in the gradebook."""
    with Gradebook(db_url) as gb:
        rows = {(a.name, s.student.id, g.name): (g.auto_score, g.manual_score, g.needs_manual_grade)
                for a in gb.assignments for s in a.submissions for nb in s.notebooks for g in nb.grades}
    assert rows, "the gradebook holds no grades"
    return rows


DECIDED_AT = re.compile(r"，\d{4}-\d\d-\d\d \d\d:\d\d UTC")  # in the export's 说明


def _table(path):
    """The rows of a CSV the course wrote, with the times of review decisions left out (each course's TA decides
    at its own moment)."""
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path} has no rows"
    return [{k: "" if k == "reviewed_at" else DECIDED_AT.sub("", v) for k, v in row.items()} for row in rows]


def _semester(root, zips, together):
    """Collect the LMS downloads, grade (the two assignments at once in two processes, or in one run), decide
    the held submission, grade the written answer in formgrader, then feedback, report and export."""
    for assignment, download in zips.items():
        course(root, "collect", str(download), "--assignment", assignment)
    if together:
        with ThreadPoolExecutor(2) as pool:  # `course` fails the test if a run does not succeed
            for run in [pool.submit(course, root, "grade", a) for a in (A1, A2)]:
                run.result()
    else:
        course(root, "grade")
    course(root, "review", A1, HELD, "--accept", "--by", "张助教")
    _grade_by_hand(root)
    for step in ("feedback", "report"):
        course(root, step)
    course(root, "export", "--to", "build/lms.csv")
    return _grades(nbgrader_config(root).CourseDirectory.db_url)


def _grade_by_hand(root):
    """The TA opens the honest submission in formgrader and gives the written answer 1.5 points."""
    with Gradebook(nbgrader_config(root).CourseDirectory.db_url) as gb:
        submission = gb.find_submission_notebook("scoring", A1, HONEST).id
    with jupyterlab(root, token=TOKEN) as url, Browser() as browser:
        browser.open(f"{url}/formgrader/manage_assignments?token={TOKEN}", settle=1)  # logs in
        browser.open(f"{url}/formgrader/gradebook/{A1}/scoring", settle=1)
        browser.page.wait_for_selector(f"a[href$='/submissions/{submission}']", timeout=60_000).click()
        box = browser.page.wait_for_selector("input.score#why_scale", timeout=60_000)
        browser.wait(2)
        box.fill("1.5")
        box.press("Tab")
        browser.page.wait_for_function("() => !document.querySelector('#why_scale').classList.contains("
                                       "'needs_manual_grade')", timeout=30_000)
        browser.wait(2)  # saved through formgrader's API


def test_a_postgresql_gradebook_grades_as_sqlite_does(tmp_path, postgres):
    sqlite_root, pg_root = copy_course(tmp_path / "sqlite"), copy_course(tmp_path / "postgres")
    with open(pg_root / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.CourseDirectory.db_url = {postgres!r}\n")
    assert nbgrader_config(pg_root).CourseDirectory.db_url == postgres
    assert nbgrader_config(sqlite_root).CourseDirectory.db_url.startswith(f"sqlite:///{sqlite_root.resolve()}/")
    for root in (sqlite_root, pg_root):
        course(root, "release", A1, A2)
    zips = _write_downloads(sqlite_root, tmp_path)

    with ThreadPoolExecutor(2) as pool:  # the two courses side by side: grading mostly waits on kernels
        expected, got = pool.submit(_semester, sqlite_root, zips, False), pool.submit(_semester, pg_root, zips, True)
        expected, got = expected.result(), got.result()

    assert got == expected, {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
    assert got[(A1, HONEST, "why_scale")][1:] == (1.5, False), "the written answer graded in formgrader is not saved"
    assert not (pg_root / "gradebook.db").exists(), "a course command wrote a SQLite gradebook beside PostgreSQL"
    for table in ("lms.csv", "grades.csv", "misconceptions.csv"):
        assert _table(pg_root / "build" / table) == _table(sqlite_root / "build" / table), table
    assert {r["学号"]: r["姓名"] for r in _table(pg_root / "build" / "lms.csv")} == NAMES
