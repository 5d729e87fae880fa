"""The main job on the demo class, end to end, through the `course` command an instructor runs."""
import csv
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from attncourse.grading import release
from conftest import copy_course

pytestmark = pytest.mark.slow

FAILED = {"demo_crash": "内核崩溃", "demo_loop": "无限循环", "demo_corrupt": "损坏"}


def course(root, *args):
    return subprocess.run([sys.executable, "-m", "attncourse.cli", *args], cwd=root,
                          capture_output=True, text=True, timeout=1200)


def read_grades(root):
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        return {(r["assignment"], r["student"]): r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("demo_course"))
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text()
                                             + "\nc.Execute.timeout = 10  # test-only: the endless loop ends sooner\n")
    first = course(root, "build", "--no-slides")
    return root, first


def test_main_command_succeeds_and_prints_summary(demo_run):
    root, run = demo_run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "汇总" in run.stdout and "demo_full" in run.stdout


def test_outputs_are_left_in_place(demo_run):
    root, _ = demo_run
    for path in ["release", "autograded/demo_full", "feedback/demo_full", "build/grades.csv",
                 "build/report/report.md", "gradebook.db"]:
        assert (root / path).exists(), path
    assert list((root / "build" / "report").glob("*-scores.png"))
    assert list((root / "build" / "report").glob("*-tests.png"))


def test_broken_submissions_fail_with_a_reason_not_a_zero(demo_run):
    root, _ = demo_run
    grades = read_grades(root)
    report = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    aids = {a for a, _ in grades}
    for aid in aids:
        for student, words in FAILED.items():
            row = grades[(aid, student)]
            assert row["status"] == "failed" and words in row["reason"] and row["score"] == "", row
            assert student in report
        for student in ("demo_full", "demo_lecturer", "demo_partial", "demo_untouched", "demo_deleted_test"):
            assert grades[(aid, student)]["status"] == "graded", grades[(aid, student)]


def test_tampering_is_flagged_for_review(demo_run):
    root, _ = demo_run
    grades = read_grades(root)
    report = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    for aid in {a for a, _ in grades}:
        assert "改写了 torch" in grades[(aid, "demo_tamper")]["review"]
        assert grades[(aid, "demo_full")]["review"] == ""
    assert "需人工复核" in report and "demo_tamper" in report


def test_grades_order_the_demo_students(demo_run):
    root, _ = demo_run
    grades = read_grades(root)
    for aid in {a for a, _ in grades}:
        score = {s: float(grades[(aid, s)]["score"]) for a, s in grades if a == aid and grades[(aid, s)]["score"]}
        assert score["demo_untouched"] == 0
        assert 0 < score["demo_partial"] < score["demo_full"]
        assert score["demo_lecturer"] == score["demo_full"] == score["demo_deleted_test"]


def test_feedback_is_chinese_and_hides_the_tests(demo_run):
    root, _ = demo_run
    for html in (root / "feedback").rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        aid = html.parent.name
        source = next((root / "source" / aid).glob("*.ipynb"))
        import nbformat
        secrets = release.secret_lines(nbformat.read(source, as_version=4), hidden_only=True)
        assert secrets
        shown = [s for s in secrets if s in text]
        assert not shown, f"{html}: shows {shown[:3]}"
        assert "BEGIN HIDDEN TESTS" not in text
        assert "✅ 通过" in text or "❌ 未通过" in text


def test_rerun_keeps_grades_and_manual_grades(demo_run):
    root, _ = demo_run
    before = read_grades(root)
    db = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(db) as gb:
        manual = [(g.cell.name, g.notebook.name, g.assignment.name) for sub in gb.find_student("demo_full").submissions
                  for nb in sub.notebooks for g in nb.grades if g.cell.name and not g.auto_score and g.needs_manual_grade]
        assert manual, "the assignments should have a manually graded answer"
        for cell, notebook, aid in manual:
            grade = gb.find_grade(cell, notebook, aid, "demo_full")
            grade.manual_score = grade.max_score
        gb.db.commit()
    again = course(root, "build", "--no-slides")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    after = read_grades(root)
    for key, row in before.items():
        if row["status"] == "graded":
            assert after[key]["status"] in ("graded", "kept")
            expected = float(row["score"]) + (sum(1 for m in manual if m[2] == key[0]) and
                                              _manual_points(db, key[0]) if key[1] == "demo_full" else 0)
            assert float(after[key]["score"]) == pytest.approx(expected), key
        else:
            assert after[key]["status"] == "failed"
    with Gradebook(db) as gb:
        for cell, notebook, aid in manual:
            assert gb.find_grade(cell, notebook, aid, "demo_full").manual_score is not None


def _manual_points(db, aid):
    with Gradebook(db) as gb:
        sub = gb.find_submission(aid, "demo_full")
        return sum(g.max_score for nb in sub.notebooks for g in nb.grades if g.manual_score is not None)


def test_bad_class_folder_is_a_clear_error_and_changes_nothing(demo_run, tmp_path):
    root, _ = demo_run
    db_before = (root / "gradebook.db").read_bytes()
    run = course(root, "build", "--no-slides", "--class", str(tmp_path / "no_such_folder"))
    assert run.returncode != 0 and "找不到提交目录" in run.stderr
    assert (root / "gradebook.db").read_bytes() == db_before
