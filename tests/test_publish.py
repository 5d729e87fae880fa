"""What people read, from a small course built in the test (a released assignment, a gradebook, autograded
notebooks written directly, no kernel): the LMS export, the grades CSV and report, and the feedback pages."""
import copy
import csv
import re

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output
from nbgrader.api import Gradebook
from nbgrader.converters import GenerateFeedback

from attncourse.grading.course import coursedir
from attncourse.grading.model import Hold, HoldKind, Status
from attncourse.grading.publish import feedback, report
from attncourse.grading.publish.export import LMSExport
from attncourse.grading.records import Record, class_outcomes, decide, hold, read_record, write_record

from conftest import HIDDEN_LINE, SOCKET, STUDENTS, small_course


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return small_course(tmp_path_factory.mktemp("publish"))


def test_outcomes_read_back_from_records_and_gradebook(course):
    """One outcome per student the gradebook names or a record holds, each from the closed set."""
    _, _, outcomes = course
    by = {o.student: o for o in outcomes}
    assert sorted(by) == [f"202300000{i}" for i in range(1, 7)] and len(outcomes) == 6
    full, wrong, held, failed, missing, refused = (by[f"202300000{i}"] for i in range(1, 7))
    assert (full.status, full.score, full.max_score, full.pending) == (Status.GRADED, 5, 7, 2)
    assert (wrong.score, wrong.cells["test_double"]) == (0, (0, 5))
    assert (held.status, held.score, held.withheld, held.flags) == (Status.HELD, 0, 5, ["单元格 #2：导入了 socket 模块"])
    assert failed.status == Status.FAILED and failed.score is None and failed.reason == "内核崩溃"
    assert (missing.status, missing.name, missing.score) == (Status.MISSING, "王五", None)
    assert refused.status == Status.NOT_COLLECTED and "作业.pdf" in refused.reason and refused.score is None


def test_lms_export(course, monkeypatch):
    """A number only for a grade: held points read 待复核, a failed, missing or not collected student's cell and
    total are empty (not 0), with the reason in 说明."""
    root, _, _ = course
    monkeypatch.chdir(root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        LMSExport(to=str(root / "lms.csv")).export(gb)
    with open(root / "lms.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == [f"202300000{i}" for i in range(1, 7)]
    assert rows["2023000002"]["姓名"] == "欧阳娜娜" and rows["2023000001"]["a"] == rows["2023000001"]["总分"] == "5"
    assert rows["2023000002"]["a"] == rows["2023000002"]["总分"] == "0"  # a real 0: a failed test
    assert "2 分待人工评分" in rows["2023000001"]["说明"]
    assert rows["2023000003"]["a"] == rows["2023000003"]["总分"] == "待复核" and "5 分待复核" in rows["2023000003"]["说明"]
    for sid, words in (("2023000004", "评分失败（内核崩溃）"), ("2023000005", "未提交"), ("2023000006", "未能收取")):
        assert rows[sid]["a"] == rows[sid]["总分"] == "", rows[sid]
        assert words in rows[sid]["说明"] and "总分未计" in rows[sid]["说明"], rows[sid]
    assert rows["2023000005"]["姓名"] == "王五"
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        LMSExport(to=str(root / "marked.csv"), no_grade="-").export(gb)
    with open(root / "marked.csv", encoding="utf-8-sig") as f:
        marked = {r["学号"]: r for r in csv.DictReader(f)}
    assert marked["2023000004"]["a"] == marked["2023000004"]["总分"] == "-" and marked["2023000001"]["a"] == "5"


def test_grades_csv_and_report(course, tmp_path):
    _, _, outcomes = course
    report.write_grades_csv(outcomes, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert len(rows) == 6
    assert rows["2023000004"]["score"] == "" and rows["2023000004"]["reason"] == "内核崩溃"
    assert (rows["2023000004"]["status"], rows["2023000004"]["status_label"]) == ("failed", "评分失败")
    assert (rows["2023000005"]["status"], rows["2023000005"]["name"], rows["2023000005"]["score"]) == ("missing", "王五", "")
    assert rows["2023000006"]["status"] == "not_collected" and rows["2023000006"]["score"] == ""
    assert rows["2023000003"]["withheld_for_review"] == "5" and "socket" in rows["2023000003"]["review"]
    assert rows["2023000003"]["status"] == "held"
    page = report.write_report(outcomes, tmp_path / "report", {"a": ["test_double"]})
    text = page.read_text(encoding="utf-8")
    assert "没有成绩的学生" in text and "待复核的提交" in text
    for sid, label in (("2023000004", "评分失败"), ("2023000005", "未提交"), ("2023000006", "未能收取")):
        assert re.search(rf"\| {sid} \| [^|]+ \| {label} \| — \|", text), sid
    assert "| 2023000003 | 李四 | 待复核 | 5/7，其中 5 分待复核 |" in text
    settled = [o.score for o in outcomes if o.status.is_grade]
    assert len(settled) == 2  # the mean leaves out held, failed, missing and not collected students
    assert f"| a | 6 | 2 | 1 | 1 | 1 | 1 | 0 | {sum(settled) / len(settled):.1f} |" in text.splitlines()[4]
    assert (tmp_path / "report" / "a-scores.png").is_file() and (tmp_path / "report" / "report.html").is_file()


def test_feedback_pages(course):
    """Every student gets a page; one without a score says why, and that it is not a 0."""
    root, cfg, outcomes = course
    assert feedback.publish(cfg, root, outcomes, say=lambda _: None) == 6
    for sid in STUDENTS:
        page = (root / "feedback" / sid / "a" / "work.html").read_text(encoding="utf-8")
        assert "double 把输入乘以 2" in page and HIDDEN_LINE not in page and "BEGIN HIDDEN" not in page
        assert "<script>alert" not in page and "待人工评分" in page
    assert 'class="verdict fail"' in (root / "feedback" / "2023000002" / "a" / "work.html").read_text(encoding="utf-8")
    held = (root / "feedback" / "2023000003" / "a" / "work.html").read_text(encoding="utf-8")
    assert "待复核" in held and 'class="verdict held"' in held and 'class="verdict pass"' not in held
    for sid, words in (("2023000004", "评分失败"), ("2023000005", "未提交"), ("2023000006", "未能收取")):
        page = (root / "feedback" / sid / "a" / "work.html").read_text(encoding="utf-8")
        assert words in page and "0 分" in page and "得分" not in page, sid


class NbconvertsPages(feedback.FeedbackExporter):
    """The course's exporter with nbconvert's own HTMLExporter.from_notebook_node (its BeautifulSoup pass over the
    page) and validation after each preprocessor: the pages `course feedback` made before it kept one exporter."""
    from_notebook_node = HTMLExporter.from_notebook_node


def _nbgraders_pages(cfg, outcome, out):
    """nbgrader's GenerateFeedback for one student with the course's settings, as `nbgrader generate_feedback`
    makes pages: a converter (an exporter, a gradebook session) of its own."""
    cfg = copy.deepcopy(cfg)
    cfg.GenerateFeedback.exporter_class = NbconvertsPages
    cfg.NbconvertsPages.optimistic_validation = False
    cd = coursedir(cfg, outcome.assignment, outcome.student)
    cd.feedback_directory = str(out)
    converter = GenerateFeedback(coursedir=cd, config=cfg)
    converter.force = True
    converter.start()
    return {p.name: p.read_text(encoding="utf-8") for p in (out / outcome.student / outcome.assignment).glob("*.html")}


def test_feedback_pages_are_nbgraders_pages_as_nbconvert_writes_them(tmp_path):
    """`course feedback` makes every page with one exporter and one gradebook session, and leaves out nbconvert's
    pass that parses each page with BeautifulSoup and writes it out again. Each graded page (full marks with a
    grader's comment and images, a failed test, held, rejected) is nbgrader's own page for the student, as that
    pass writes it: the same elements, attributes and text, and nbconvert's alt text on each image without one."""
    from attncourse.grading.cells import SHOWN_RUN
    (tmp_path / "course").mkdir()
    root, cfg, _ = small_course(tmp_path / "course")
    db = cfg.CourseDirectory.db_url
    write_record(root, "a", "2023000002", Record(Status.GRADED, holds=[SOCKET], held=hold(db, "a", "2023000002", None)))
    decide(db, root, "a", "2023000002", False, "王助教", "读取了评分程序的数据")
    with Gradebook(db) as gb:
        gb.find_comment("why", "work", "a", "2023000001").manual_comment = "写得**好**"
        gb.db.commit()
    path = root / "autograded" / "2023000001" / "a" / "work.ipynb"
    nb = nbformat.read(path, as_version=4)
    png = "iVBORw0KGgo="
    nb.cells += [
        new_markdown_cell(f'![图 1](a.png) <img src="b.png"> <IMG SRC="data:image/png;base64,{png}" title="1>0"/>'),
        new_code_cell("plot()", metadata={SHOWN_RUN: "student"}, outputs=[
            new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
            new_output("display_data", data={"image/png": png}, metadata={"image/png": {"alt": "热图", "width": 40}}),
            new_output("display_data", data={"text/html": '<img src="c.png" title="alt=x"><img alt="" src="d.png">'})])]
    nbformat.write(nb, path)
    with Gradebook(db) as gb:
        outcomes = [o for o in class_outcomes(gb, root, ["a"], []) if o.status.has_score]
    assert sorted(o.status for o in outcomes) == sorted([Status.GRADED, Status.REJECTED, Status.HELD])
    assert feedback.publish(cfg, root, outcomes, say=lambda _: None) == 3
    for o in outcomes:
        for name, theirs in _nbgraders_pages(cfg, o, tmp_path / "nbgrader").items():
            ours = (root / "feedback" / o.student / o.assignment / name).read_text(encoding="utf-8")
            assert str(BeautifulSoup(ours, "html.parser")) == theirs, o.student
    page = (root / "feedback" / "2023000001" / "a" / "work.html").read_text(encoding="utf-8")
    assert page.count(f'alt="{feedback.NO_ALT}"') == 4 and 'alt="热图"' in page and "写得<strong>好</strong>" in page


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
    """`course review` lists the held submissions with their holds, `--accept` releases the points in one step
    and records who and when, `--reject` withholds them with the reviewer's reason; a decision without a
    reviewer's name is refused; the export, the grades CSV, the report and the feedback then say so."""
    from attncourse.cli import main
    root, cfg, outcomes = small_course(tmp_path)
    db = cfg.CourseDirectory.db_url
    write_record(root, "a", "2023000001", Record(Status.GRADED, holds=[Hold(HoldKind.INTROSPECTION, "访问了 __globals__",
                                                                            "单元格 double 第 2 行", 1, 2)],
                                                 held=hold(db, "a", "2023000001", None)))
    for sid in STUDENTS:
        (root / "submitted" / sid / "a").mkdir(parents=True, exist_ok=True)

    def run(*args, ok=True):
        assert (main(["--root", str(root), *args]) == 0) == ok
        return capsys.readouterr()

    listed = run("review").out
    assert "2023000003" in listed and "5 分待复核" in listed and "socket" in listed and "共 2 份待复核" in listed
    assert "计入" in run("review", "a", "2023000003", "--accept", "--by", "李助教", "--note", "用 socket 打印日志").out
    decision = read_record(root, "a", "2023000003").review
    assert decision.decision == "accepted" and decision.by == "李助教" and decision.points == 5
    assert decision.at and decision.flags == ["单元格 #2：导入了 socket 模块"]
    refused = run("review", "a", "2023000001", "--reject", ok=False)  # this machine's user is root: nobody
    assert "复核人" in refused.err and read_record(root, "a", "2023000001").review is None
    assert "不计入" in run("review", "a", "2023000001", "--reject", "--by", "王助教", "--note", "读取了评分程序的数据").out
    assert "共 0 份待复核" in run("review").out
    run("export", "--to", str(root / "after.csv"))
    with open(root / "after.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert rows["2023000003"]["a"] == "5" and "待复核" not in rows["2023000003"]["说明"]
    assert "复核后计入（李助教" in rows["2023000003"]["说明"]
    assert rows["2023000001"]["a"] == "0" and read_record(root, "a", "2023000001").review.decision == "rejected"
    run("report")
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        graded = {r["student"]: r for r in csv.DictReader(f)}
    assert (graded["2023000003"]["review_decision"], graded["2023000003"]["reviewed_by"]) == ("accepted", "李助教")
    assert graded["2023000003"]["withheld_for_review"] == "0" and graded["2023000003"]["score"] == "5"
    assert (graded["2023000001"]["status"], graded["2023000001"]["review_note"]) == ("rejected", "读取了评分程序的数据")
    text = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    assert "待复核的提交" not in text and "已复核的提交" in text and "复核后计入（5 分） | 李助教" in text
    run("feedback")
    page = (root / "feedback" / "2023000001" / "a" / "work.html").read_text(encoding="utf-8")
    assert "复核后不计入" in page and "读取了评分程序的数据" in page and "王助教" in page
    assert HoldKind.INTROSPECTION.reason in page and 'class="verdict withheld"' in page
    assert 'class="verdict pass"' not in page  # no 通过 beside points the review withheld
    accepted = (root / "feedback" / "2023000003" / "a" / "work.html").read_text(encoding="utf-8")
    assert "复核后计入" in accepted and 'class="verdict pass"' in accepted and "待复核" not in accepted
    with Gradebook(db) as gb:  # formgrader's "Tests Failed?" follows what the tests found, not the hold
        assert not gb.find_submission_notebook("work", "a", "2023000003").failed_tests
        assert gb.find_grade("test_double", "work", "a", "2023000001").score == 0


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


def test_a_decision_is_taken_once(tmp_path):
    """A second `course review` on a decided submission (another TA, a repeated command) is refused and changes
    nothing."""
    from attncourse.grading.records import decide
    root, cfg, _ = small_course(tmp_path)
    db = cfg.CourseDirectory.db_url
    assert decide(db, root, "a", "2023000003", True, "李助教") == 5
    first = read_record(root, "a", "2023000003").review
    with pytest.raises(ValueError, match="已经复核过"):
        decide(db, root, "a", "2023000003", False, "王助教", "改主意")
    assert read_record(root, "a", "2023000003").review == first
