"""What people read, from a small course built in the test (a released assignment, a gradebook, autograded
notebooks written directly, no kernel): the LMS export, the grades CSV and report, and the feedback pages."""
import csv
import shutil

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.api import Gradebook

from attncourse.grading.course import nbgrader_config
from attncourse.grading.model import Status
from attncourse.grading.publish import feedback, report
from attncourse.grading.publish.export import LMSExport
from attncourse.grading.records import hold_for_review, outcome_from_record, write_record
from attncourse.grading.release import student_version

from conftest import ROOT

HIDDEN_LINE = "assert double(21) == 42, '二十一的两倍不对'"


def _meta(**kw):
    return {"nbgrader": {"schema_version": 3, "locked": False, "solution": False, "grade": False, **kw}}


def source_notebook():
    return new_notebook(cells=[
        new_code_cell("import math", metadata=_meta(grade_id="imports", locked=True)),
        new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                      metadata=_meta(grade_id="double", solution=True)),
        new_code_cell('"""double 把输入乘以 2"""\nassert double(1) == 2\n### BEGIN HIDDEN TESTS\n'
                      f"{HIDDEN_LINE}\n### END HIDDEN TESTS",
                      metadata=_meta(grade_id="test_double", grade=True, locked=True, points=5)),
        new_markdown_cell("为什么？\n\n=== BEGIN MARK SCHEME ===\n因为。\n=== END MARK SCHEME ===",
                          metadata=_meta(grade_id="why", grade=True, solution=True, points=2))],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


STUDENTS = {"2023000001": ("张", "三", True), "2023000002": ("欧阳", "娜娜", False), "2023000003": ("李", "四", True)}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Assignment `a` released; three students: full marks, a failed test, and one held for review."""
    root = tmp_path_factory.mktemp("publish")
    for name in ("nbgrader_config.py", "course.toml"):
        shutil.copy(ROOT / name, root / name)
    (root / "build").mkdir()
    (root / "build" / "vendor").symlink_to(ROOT / "build" / "vendor")
    (root / "source" / "a").mkdir(parents=True)
    nbformat.write(source_notebook(), root / "source" / "a" / "work.ipynb")
    cfg = nbgrader_config(root)
    student_version.release(cfg, root, "a", say=lambda _: None)
    released = nbformat.read(root / "release" / "a" / "work.ipynb", as_version=4)
    db = cfg.CourseDirectory.db_url
    with Gradebook(db) as gb:
        for sid, (last, first, passed) in STUDENTS.items():
            gb.update_or_create_student(sid, last_name=last, first_name=first)
            gb.add_submission("a", sid)
            test = gb.find_grade("test_double", "work", "a", sid)
            test.auto_score, test.needs_manual_grade = (5 if passed else 0), False
            gb.find_grade("why", "work", "a", sid).needs_manual_grade = True
        gb.db.commit()
    for sid, (_, _, passed) in STUDENTS.items():
        nb = nbformat.from_dict(released)
        nb.cells[1].source = "def double(x):\n    return x + x" if passed else "def double(x):\n    return x"
        if not passed:
            nb.cells[2].outputs = [new_output("error", ename="AssertionError", evalue="double(1) 应为 2",
                                              traceback=[])]
        nb.cells[3].source = "<b>因为</b>要加倍。<script>alert(1)</script>"
        (root / "autograded" / sid / "a").mkdir(parents=True)
        nbformat.write(nb, root / "autograded" / sid / "a" / "work.ipynb")
        write_record(root, "a", sid, {"status": "graded", "flags": ["单元格 #2：导入了 socket 模块"]
                                      if sid == "2023000003" else [], "notes": []})
    hold_for_review(db, "a", "2023000003")
    write_record(root, "a", "2023000004", {"status": "failed", "reason": "内核崩溃", "notes": []})
    outcomes = [outcome_from_record(db, root, "a", sid) for sid in [*STUDENTS, "2023000004"]]
    return root, cfg, outcomes


def test_outcomes_read_back_from_records_and_gradebook(course):
    _, _, outcomes = course
    full, wrong, held, failed = outcomes
    assert (full.status, full.score, full.max_score, full.pending) == (Status.GRADED, 5, 7, 2)
    assert (wrong.score, wrong.cells["test_double"]) == (0, (0, 5))
    assert (held.score, held.withheld, held.flags) == (0, 5, ["单元格 #2：导入了 socket 模块"])
    assert failed.status == Status.FAILED and failed.score is None and failed.reason == "内核崩溃"


def test_lms_export(course, monkeypatch):
    root, _, _ = course
    monkeypatch.chdir(root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        LMSExport(to=str(root / "lms.csv")).export(gb)
    with open(root / "lms.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(STUDENTS)
    assert rows["2023000002"]["姓名"] == "欧阳娜娜" and rows["2023000001"]["a"] == "5"
    assert "2 分待人工评分" in rows["2023000001"]["说明"]
    assert rows["2023000003"]["a"] == rows["2023000003"]["总分"] == "待复核" and "5 分待复核" in rows["2023000003"]["说明"]


def test_grades_csv_and_report(course, tmp_path):
    _, _, outcomes = course
    report.write_grades_csv(outcomes, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert rows["2023000004"]["score"] == "" and rows["2023000004"]["reason"] == "内核崩溃"
    assert rows["2023000003"]["withheld_for_review"] == "5" and "socket" in rows["2023000003"]["review"]
    page = report.write_report(outcomes, tmp_path / "report", {"a": ["test_double"]})
    text = page.read_text(encoding="utf-8")
    assert "评分失败的提交" in text and "2023000004" in text and "需人工复核" in text
    assert (tmp_path / "report" / "a-scores.png").is_file() and (tmp_path / "report" / "report.html").is_file()


def test_feedback_pages(course):
    root, cfg, outcomes = course
    assert feedback.publish(cfg, root, outcomes, say=lambda _: None) == 3
    for sid in STUDENTS:
        page = (root / "feedback" / sid / "a" / "work.html").read_text(encoding="utf-8")
        assert "double 把输入乘以 2" in page and HIDDEN_LINE not in page and "BEGIN HIDDEN" not in page
        assert "<script>alert" not in page and "待人工评分" in page
    assert 'class="verdict fail"' in (root / "feedback" / "2023000002" / "a" / "work.html").read_text(encoding="utf-8")


def test_feedback_that_shows_a_hidden_test_is_withheld(course):
    root, cfg, outcomes = course
    leaky = root / "autograded" / "2023000001" / "a" / "work.ipynb"
    nb = nbformat.read(leaky, as_version=4)
    nb.cells.append(new_code_cell("print(captured)", outputs=[new_output("stream", name="stdout", text=HIDDEN_LINE)]))
    nbformat.write(nb, leaky)
    try:
        full = outcomes[0]
        assert feedback.publish(cfg, root, [full], say=lambda _: None) == 0
        assert not (root / "feedback" / "2023000001" / "a").exists() and "隐藏测试" in full.flags[-1]
    finally:
        nb.cells.pop()
        nbformat.write(nb, leaky)



def test_a_review_decision_is_one_step_and_recorded(course, monkeypatch):
    """`course review` lists the held submission with its flags, `--accept` releases its points in one step and
    records who and when; the export then shows the score. (Runs last: it changes the course.)"""
    from attncourse.grading.records import read_record

    from conftest import course as run_course
    root, _, _ = course
    for sid in STUDENTS:
        (root / "submitted" / sid / "a").mkdir(parents=True, exist_ok=True)

    def run(*args):
        return run_course(root, *args).stdout

    listed = run("review")  # the submission held in the fixture, and the one whose feedback leaked above
    assert "2023000003" in listed and "5 分待复核" in listed and "socket" in listed and "共 2 份待复核" in listed
    assert "计入" in run("review", "a", "2023000003", "--accept", "--by", "李助教", "--note", "用 socket 打印日志")
    decision = read_record(root, "a", "2023000003")["review"]
    assert decision["decision"] == "accepted" and decision["by"] == "李助教" and decision["points"] == 5
    assert decision["at"] and decision["flags"] == ["单元格 #2：导入了 socket 模块"]
    assert "记为 0 分" in run("review", "a", "2023000001", "--reject")
    assert "共 0 份待复核" in run("review")
    run("export", "--to", str(root / "after.csv"))
    with open(root / "after.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert rows["2023000003"]["a"] == "5" and "待复核" not in rows["2023000003"]["说明"]
    assert rows["2023000001"]["a"] == "0" and read_record(root, "a", "2023000001")["review"]["decision"] == "rejected"


def test_student_text_is_escaped_for_the_csv_report_and_terminal(tmp_path):
    import os
    import re

    from attncourse.grading.model import Outcome
    evil = Outcome("a", "2023000009", Status.FAILED, reason="\x1b[2K\r✔ 20/20 =cmd|' ![x](http://evil.example/p.png)"
                   " <img src=http://evil.example/q.png>", notes=["**粗** " + "长" * 10_000])
    report.write_grades_csv([evil], tmp_path / "grades.csv")
    page = report.write_report([evil], tmp_path / "report", {"a": []}).with_suffix(".html").read_text(encoding="utf-8")
    assert not re.search(r"<img[^>]*evil", page) and "<strong>" not in page.split("</style>")[-1]
    row = (tmp_path / "grades.csv").read_text(encoding="utf-8-sig").splitlines()[1]
    assert "\x1b" not in row and "\r" not in row and len(row) < 3000
    assert "\x1b" not in report.describe(evil) and "\x1b" not in report.summary_table([evil])
    assert os.stat(tmp_path / "grades.csv").st_mode & 0o044 == 0o044 & ~os.umask(os.umask(0))
