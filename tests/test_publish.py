"""What people read, from a small course built in the test (a released assignment, a gradebook, autograded
notebooks written directly, no kernel): the LMS export, the grades CSV and report, and the feedback pages."""
import csv

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output
from nbgrader.api import Gradebook

from attncourse.grading.model import Status
from attncourse.grading.publish import feedback, report
from attncourse.grading.publish.export import LMSExport
from attncourse.grading.records import Record, hold, read_record, write_record

from conftest import HIDDEN_LINE, STUDENTS, small_course


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return small_course(tmp_path_factory.mktemp("publish"))


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
    assert "评分失败的提交" in text and "2023000004" in text and "待复核的提交" in text
    assert "| 2023000003 | 李四 | 5/7，其中 5 分待复核 |" in text
    held = [o for o in outcomes if o.withheld]
    settled = [o.score for o in outcomes if o.status.has_score and not o.withheld]
    assert held and settled  # the mean leaves out a submission whose points wait for review
    assert f"| {len(held)} | 1 | {sum(settled) / len(settled):.1f} |" in text.splitlines()[4]
    assert (tmp_path / "report" / "a-scores.png").is_file() and (tmp_path / "report" / "report.html").is_file()


def test_feedback_pages(course):
    root, cfg, outcomes = course
    assert feedback.publish(cfg, root, outcomes, say=lambda _: None) == 3
    for sid in STUDENTS:
        page = (root / "feedback" / sid / "a" / "work.html").read_text(encoding="utf-8")
        assert "double 把输入乘以 2" in page and HIDDEN_LINE not in page and "BEGIN HIDDEN" not in page
        assert "<script>alert" not in page and "待人工评分" in page
    assert 'class="verdict fail"' in (root / "feedback" / "2023000002" / "a" / "work.html").read_text(encoding="utf-8")


def test_feedback_shows_the_students_own_run_and_never_the_graders(course):
    """The grader's run of the student's code, which received the grader's reference code, may print anything
    the student's code captured: feedback shows no output of it, only what the student's own run printed."""
    from attncourse.grading.cells import SHOWN_RUN
    root, cfg, outcomes = course
    leaky = root / "autograded" / "2023000001" / "a" / "work.ipynb"
    nb = nbformat.read(leaky, as_version=4)
    nb.cells += [new_code_cell("print(captured)", outputs=[new_output("stream", name="stdout", text=HIDDEN_LINE)],
                               metadata={SHOWN_RUN: "grader"}),
                 new_code_cell("print(mine)", outputs=[new_output("stream", name="stdout", text="我自己的输出 4101.3")],
                               metadata={SHOWN_RUN: "student"})]
    nbformat.write(nb, leaky)
    try:
        assert feedback.publish(cfg, root, [outcomes[0]], say=lambda _: None) == 1
        page = (root / "feedback" / "2023000001" / "a" / "work.html").read_text(encoding="utf-8")
        assert HIDDEN_LINE not in page and "captured" in page and "我自己的输出 4101.3" in page
    finally:
        del nb.cells[-2:]
        nbformat.write(nb, leaky)


def test_a_feedback_page_has_a_bounded_size_whatever_the_student_wrote(course):
    """Megabytes of source, of the student's own printed output and of pasted-in pictures: the page shows the
    start of each, cut with a note, and stays under `MAX_PAGE_BYTES`."""
    from attncourse.grading.cells import SHOWN_RUN
    root, cfg, outcomes = course
    path = root / "autograded" / "2023000001" / "a" / "work.ipynb"
    nb = nbformat.read(path, as_version=4)
    picture = new_output("display_data", data={"image/png": "iVBOR" * 200_000, "text/plain": "<Figure>"})
    nb.cells += [new_code_cell("# 开头" + "数据" * 500_000),
                 new_code_cell("print(log)", outputs=[new_output("stream", name="stdout", text="第 1 轮\n" * 300_000),
                                                      picture, picture], metadata={SHOWN_RUN: "student"})]
    nbformat.write(nb, path)
    try:
        assert feedback.publish(cfg, root, [outcomes[0]], say=lambda _: None) == 1
        page = root / "feedback" / "2023000001" / "a" / "work.html"
        text = page.read_text(encoding="utf-8")
        assert page.stat().st_size <= feedback.MAX_PAGE_BYTES and "# 开头数据" in text and "个字符未显示" in text
        assert "double 把输入乘以 2" in text
    finally:
        del nb.cells[-2:]
        nbformat.write(nb, path)


def test_a_review_decision_is_one_step_and_recorded(tmp_path, capsys):
    """`course review` lists the held submissions with their flags, `--accept` releases the points in one step
    and records who and when, `--reject` gives 0; the export, the grades CSV and the report then say so."""
    from attncourse.cli import main
    root, cfg, outcomes = small_course(tmp_path)
    db = cfg.CourseDirectory.db_url
    write_record(root, "a", "2023000001", Record(Status.GRADED, flags=["反馈中出现了隐藏测试的内容"],
                                                 held=hold(db, "a", "2023000001", None)))
    for sid in STUDENTS:
        (root / "submitted" / sid / "a").mkdir(parents=True, exist_ok=True)

    def run(*args):
        assert main(["--root", str(root), *args]) == 0
        return capsys.readouterr().out

    listed = run("review")
    assert "2023000003" in listed and "5 分待复核" in listed and "socket" in listed and "共 2 份待复核" in listed
    assert "计入" in run("review", "a", "2023000003", "--accept", "--by", "李助教", "--note", "用 socket 打印日志")
    decision = read_record(root, "a", "2023000003").review
    assert decision.decision == "accepted" and decision.by == "李助教" and decision.points == 5
    assert decision.at and decision.flags == ["单元格 #2：导入了 socket 模块"]
    assert "记为 0 分" in run("review", "a", "2023000001", "--reject")
    assert "共 0 份待复核" in run("review")
    run("export", "--to", str(root / "after.csv"))
    with open(root / "after.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert rows["2023000003"]["a"] == "5" and "待复核" not in rows["2023000003"]["说明"]
    assert "已确认计入（李助教" in rows["2023000003"]["说明"]
    assert rows["2023000001"]["a"] == "0" and read_record(root, "a", "2023000001").review.decision == "rejected"
    run("report")
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        graded = {r["student"]: r for r in csv.DictReader(f)}
    assert (graded["2023000003"]["review_decision"], graded["2023000003"]["reviewed_by"]) == ("accepted", "李助教")
    assert graded["2023000003"]["withheld_for_review"] == "0" and graded["2023000003"]["score"] == "5"
    text = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    assert "待复核的提交" not in text and "已复核的提交" in text and "确认计入（5 分） | 李助教" in text


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
