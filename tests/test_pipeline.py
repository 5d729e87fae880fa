"""The one-command demo (`course build`) end to end: the demo class in build/demo/, a course of its own."""
import csv
import re
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from attncourse.grading.release import student_version as release

from conftest import copy_course

pytestmark = pytest.mark.slow

FAILED = {"demo_crash": "内核崩溃", "demo_loop": "无限循环", "demo_corrupt": "损坏"}
GRADED = ("demo_full", "demo_lecturer", "demo_partial", "demo_untouched", "demo_deleted_test", "demo_tamper")


def course(root, *args):
    return subprocess.run([sys.executable, "-m", "attncourse.cli", *args], cwd=root,
                          capture_output=True, text=True, timeout=1200)


def read_grades(demo):
    with open(demo / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = {(r["assignment"], r["student"]): r for r in csv.DictReader(f)}
    assert rows, "grades.csv has no rows"
    return rows


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("demo_course"))
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text()
                                             + "\nc.Execute.timeout = 10  # test-only: the endless loop ends sooner\n")
    real = course(root, "release", "a1_scoring")  # a real class has begun in this course folder
    assert real.returncode == 0, real.stderr
    state = {name: (root / name).read_bytes() for name in ("gradebook.db", release.RECORD)}
    first = course(root, "build", "--no-slides")
    return root, root / "build" / "demo", first, state


def test_main_command_succeeds_and_prints_summary(demo_run):
    root, demo, run, _ = demo_run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "汇总" in run.stdout and "demo_full" in run.stdout


def test_the_demo_never_touches_the_real_class(demo_run):
    root, demo, _, state = demo_run
    for name, content in state.items():
        assert (root / name).read_bytes() == content, f"the demo changed the real {name}"
    assert not (root / "submitted").exists() and not (root / "feedback").exists()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert gb.students == []


def test_outputs_are_left_in_place(demo_run):
    _, demo, _, _ = demo_run
    for path in ["release", "released.json", "gradebook.db", "autograded/demo_full", "feedback/demo_full",
                 "build/grades.csv", "build/report/report.md", "build/report/report.html"]:
        assert (demo / path).exists(), path
    assert list((demo / "build" / "report").glob("*-scores.png"))
    assert list((demo / "build" / "report").glob("*-tests.png"))


def test_broken_submissions_fail_with_a_reason_not_a_zero(demo_run):
    _, demo, _, _ = demo_run
    grades = read_grades(demo)
    report = (demo / "build" / "report" / "report.html").read_text(encoding="utf-8")
    aids = {a for a, _ in grades}
    assert len(aids) >= 3
    for aid in aids:
        for student, words in FAILED.items():
            row = grades[(aid, student)]
            assert row["status"] == "failed" and words in row["reason"] and row["score"] == "", row
            assert student in report
        for student in GRADED:
            assert grades[(aid, student)]["status"] == "graded", grades[(aid, student)]


def test_tampering_is_noted_and_changes_nothing(demo_run):
    """The demo's tamperer patches torch's comparison functions in its own kernel: verdicts are made in the
    grader, so nothing is held; the TA reads a note."""
    _, demo, _, _ = demo_run
    grades = read_grades(demo)
    report = (demo / "build" / "report" / "report.html").read_text(encoding="utf-8")
    for aid in {a for a, _ in grades}:
        row = grades[(aid, "demo_tamper")]
        assert "改写了 torch" in row["notes"] and row["review"] == "" and float(row["score"]) == 0, row
        assert grades[(aid, "demo_full")]["review"] == grades[(aid, "demo_full")]["notes"] == ""
    assert "demo_tamper" in report


def test_grades_order_the_demo_students(demo_run):
    _, demo, _, _ = demo_run
    grades = read_grades(demo)
    for aid in {a for a, _ in grades}:
        score = {s: float(grades[(aid, s)]["score"]) for s in GRADED}
        assert score["demo_untouched"] == 0
        assert 0 < score["demo_partial"] < score["demo_full"]
        assert score["demo_lecturer"] == score["demo_full"] == score["demo_deleted_test"] > 0


def test_feedback_is_chinese_and_hides_the_tests(demo_run):
    _, demo, _, _ = demo_run
    pages = sorted((demo / "feedback").rglob("*.html"))
    grades = read_grades(demo)
    assert len(pages) == len(grades)  # a page for every student: a failed one says why, with no score
    for page in pages:
        text = page.read_text(encoding="utf-8")
        source = next((demo / "source" / page.parent.name).glob("*.ipynb"))
        secrets = release.secret_lines(nbformat.read(source, as_version=4), hidden_only=True)
        assert secrets
        assert not [s for s in secrets if s in text], page
        assert "BEGIN HIDDEN TESTS" not in text
        row = grades[(page.parent.name, page.parent.parent.name)]
        if row["status"] == "graded":
            assert 'class="verdict pass"' in text or 'class="verdict fail"' in text
        else:
            assert row["status_label"] in text and "不是 0 分" in text and "得分" not in text, page


def test_feedback_reads_offline_in_chinese(demo_run):
    """Labels in Chinese, an ungraded written answer shown as waiting (not as 0), no emoji (fonts without them
    show boxes), and math typeset by the MathJax file published beside the page, not from a CDN."""
    _, demo, _, _ = demo_run
    grades = read_grades(demo)
    pages = [p for p in sorted((demo / "feedback").rglob("*.html"))
             if grades[(p.parent.name, p.parent.parent.name)]["status"] == "graded"]
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "你的回答" in text and "得分：" in text and "Student's answer" not in text, page
        if page.parent.parent.name not in ("demo_untouched", "demo_tamper"):  # unanswered: a 0, not waiting
            assert "待人工评分" in text, f"{page}: the written answer should be shown as waiting for a grader"
        assert not re.search(r"<script[^>]+src=\"(https?:)?//", text) and "✅" not in text and "❌" not in text, page
        assert re.search(r'<script[^>]*src="mathjax-tex-svg.js"', text) and (page.parent / "mathjax-tex-svg.js").is_file()


def test_rerun_keeps_grades_and_manual_grades(demo_run):
    root, demo, _, _ = demo_run
    before = read_grades(demo)
    db = f"sqlite:///{demo / 'gradebook.db'}"
    with Gradebook(db) as gb:
        manual = [(g.cell.name, g.notebook.name, g.assignment.name) for sub in gb.find_student("demo_full").submissions
                  for nb in sub.notebooks for g in nb.grades if g.needs_manual_grade and g.manual_score is None]
        assert manual, "the assignments should have a manually graded answer"
        for cell, notebook, aid in manual:
            grade = gb.find_grade(cell, notebook, aid, "demo_full")
            grade.manual_score = grade.max_score
        gb.db.commit()
    again = course(root, "build", "--no-slides")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    marks = re.findall(r"\[\d+/\d+[^\]]*\] (\S+)\s+(\S+)\s+([✔＝✘])", again.stdout)
    assert marks and all(mark == "＝" for aid, student, mark in marks if student in GRADED), \
        "unchanged submissions must be kept, not graded again"
    after = read_grades(demo)
    assert set(after) == set(before)
    for key, row in before.items():
        assert after[key]["status"] == row["status"], key
        if row["status"] == "graded":
            added = sum(1 for m in manual if m[2] == key[0]) and _manual_points(db, key[0]) if key[1] == "demo_full" else 0
            assert float(after[key]["score"]) == pytest.approx(float(row["score"]) + added), key
    with Gradebook(db) as gb:
        for cell, notebook, aid in manual:
            assert gb.find_grade(cell, notebook, aid, "demo_full").manual_score is not None


def _manual_points(db, aid):
    with Gradebook(db) as gb:
        sub = gb.find_submission(aid, "demo_full")
        return sum(g.max_score for nb in sub.notebooks for g in nb.grades if g.manual_score is not None)


def test_bad_class_folder_is_a_clear_error_and_changes_nothing(demo_run, tmp_path):
    root, _, _, state = demo_run
    run = course(root, "grade", "--class", str(tmp_path / "no_such_folder"))
    assert run.returncode != 0 and "找不到提交目录" in run.stderr
    assert (root / "gradebook.db").read_bytes() == state["gradebook.db"]
