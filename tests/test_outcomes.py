"""One outcome per student, everywhere: a class with every outcome, collected from a Moodle-style and a
Canvas-style download through the `course` commands, graded in the sandbox, reviewed, published and exported.
Each student the download or the roster names has exactly one row in grades.csv, the report, the LMS export and
the feedback, all saying the same thing, and nothing that is not a grade reads as a number. The report and the
feedback pages are opened in Chromium at 1280×800.
"""
import csv
import re

import nbformat
import pytest

from attncourse.browser import Browser
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import grade_id
from attncourse.grading.model import Status

from conftest import auto_points, copy_course, course, zip_bytes

pytestmark = [pytest.mark.slow, pytest.mark.needs_root, pytest.mark.needs_browser]

A1 = "a1_scoring"
ROSTER = {  # student number: (name, Moodle participant id, what the student hands in)
    "2023100001": ("张三", 901, "graded"),
    "2023100002": ("李四", 902, "accepted"),  # held, then accepted by command
    "2023100003": ("王五", 903, "rejected"),  # held, then rejected by command, with the reason
    "2023100004": ("赵六", 904, "failed"),  # a truncated notebook
    "2023100005": ("钱七", 905, "zip"),  # only a zip holding the notebook
    "2023100006": ("孙八", 906, "long name"),  # a name over 255 bytes inside the LMS's folder
    "2023100007": ("周九", 907, "not collected"),  # only a PDF
    "2023100008": ("吴十", 908, "missing"),  # on the roster, nothing uploaded
}
EXPECTED = {"graded": Status.GRADED, "accepted": Status.ACCEPTED, "rejected": Status.REJECTED, "failed": Status.FAILED,
            "zip": Status.GRADED, "long name": Status.GRADED, "not collected": Status.NOT_COLLECTED,
            "missing": Status.MISSING}
REASON = "用 ctypes 读取了评分程序的内存"


def _notebooks(root):
    catalog = load_catalog(root, A1)
    src = source_notebook(root, A1, catalog)
    rel = nbformat.read(root / "release" / A1 / "scoring.ipynb", as_version=4)
    full, held = answered(rel, src), answered(rel, src)
    for cell in held.cells:
        if grade_id(cell) == "masked_softmax":
            cell.source = "import ctypes\n" + cell.source
    return nbformat.writes(full), nbformat.writes(held)


def _moodle_download(root, path):
    full, held = _notebooks(root)
    files = []
    for name, pid, kind in ROSTER.values():
        folder = f"{name}_{pid}_assignsubmission_file_/"
        files += {"graded": [(folder + "scoring.ipynb", full)],
                  "accepted": [(folder + "scoring.ipynb", held)], "rejected": [(folder + "scoring.ipynb", held)],
                  "failed": [(folder + "scoring.ipynb", full[:len(full) * 3 // 5])],
                  "zip": [(folder + "作业1.zip", zip_bytes([("作业1/scoring.ipynb", full)]))],
                  "long name": [(folder + "我的注意力作业" * 14 + ".ipynb", full)],
                  "not collected": [(folder + "作业1.pdf", b"%PDF-1.4 ...")], "missing": []}[kind]
    path.write_bytes(zip_bytes(files))
    return path


def _configure(root, preset, roster_csv):
    (root / "roster.csv").write_text(roster_csv, encoding="utf-8")
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.LMSFileNames.preset = {preset!r}\nc.LMSFileNames.roster = 'roster.csv'\n"
                "c.Execute.timeout = 20\n")


@pytest.fixture(scope="module")
def moodle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outcomes")
    root = copy_course(tmp / "moodle")
    _configure(root, "moodle", "学号,姓名,LMS id\n" + "".join(f"{sid},{n},{pid}\n" for sid, (n, pid, _) in ROSTER.items()))
    course(root, "release", A1)
    log = {"collect": course(root, "collect", str(_moodle_download(root, tmp / "moodle.zip")), "--assignment", A1)}
    log["grade"] = course(root, "grade", A1)
    log["accept"] = course(root, "review", A1, "2023100002", "--accept", "--by", "助教甲")
    log["reject"] = course(root, "review", A1, "2023100003", "--reject", "--by", "助教乙", "--note", REASON)
    for step in ("feedback", "report", "export"):
        log[step] = course(root, step)
    return root, log


def _rows(path):
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path} has no rows"
    return rows


def _one_outcome_everywhere(root, students):
    """{student: Status} read from grades.csv, after checking that the report, the export and the feedback
    say the same for each of `students`, each exactly once."""
    grades = _rows(root / "build" / "grades.csv")
    assert sorted(r["student"] for r in grades) == sorted(students), "one row per student in grades.csv"
    lms = _rows(root / "build" / "grades_lms.csv")
    assert sorted(r["学号"] for r in lms) == sorted(students), "one row per student in the export"
    lms = {r["学号"]: r for r in lms}
    report = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    report = report.split("### 每名学生")[1].split("###")[0]  # the per-student table
    found = {}
    for row in grades:
        sid, status = row["student"], Status(row["status"])
        found[sid] = status
        assert row["name"] == students[sid], row
        assert row["status_label"] == status.label
        listed = re.findall(rf"^\| {sid} \| {students[sid]} \| ([^|]+) \| ([^|]+) \|", report, re.M)
        assert len(listed) == 1 and listed[0][0].strip() == status.label, (sid, listed)
        cell = lms[sid][A1]
        if status.is_grade:
            assert cell == row["score"] != "" and float(cell) == float(listed[0][1].split("/")[0]), (sid, cell)
        else:
            assert cell == row["score"] == "" and listed[0][1].strip() == "—", (sid, cell, row["score"])
            assert lms[sid]["总分"] == "" and status.label in lms[sid]["说明"], lms[sid]
        pages = list((root / "feedback" / sid / A1).glob("*.html"))
        assert len(pages) == 1, (sid, pages)
        page = pages[0].read_text(encoding="utf-8")
        assert ("得分：" in page) == status.has_score and (status == Status.GRADED or status.label in page), sid
    return found


def test_every_student_has_one_consistent_outcome(moodle):
    root, log = moodle
    students = {sid: name for sid, (name, _, _) in ROSTER.items()}
    found = _one_outcome_everywhere(root, students)
    assert found == {sid: EXPECTED[kind] for sid, (_, _, kind) in ROSTER.items()}, found
    grades = {r["student"]: r for r in _rows(root / "build" / "grades.csv")}
    full = auto_points(A1)
    for sid in ("2023100001", "2023100002", "2023100005", "2023100006"):
        assert float(grades[sid]["score"]) == full, grades[sid]
    assert float(grades["2023100003"]["score"]) < full and grades["2023100003"]["review_note"] == REASON
    assert grades["2023100002"]["reviewed_by"] == "助教甲" and grades["2023100003"]["reviewed_by"] == "助教乙"
    assert "作业1.pdf" in grades["2023100007"]["reason"] and "损坏" in grades["2023100004"]["reason"], grades
    assert "作业1.zip" in grades["2023100005"]["notes"] and "超过 255 字节" in grades["2023100006"]["notes"]


def test_collect_names_the_students_it_could_not_take_in_first(moodle):
    _, log = moodle
    out = log["collect"].stdout
    assert "1 名学生的上传没能收进来评分" in out and "2023100007：上传的是 作业1.pdf（不是 notebook）" in out
    assert out.index("没能收进来评分") < out.index("收集 ") and "1 名学生未能收取" in out


def test_the_feedback_says_what_happened(moodle):
    root, _ = moodle
    with Browser() as browser:
        for sid, words in (("2023100003", ["复核后不计入", REASON, "助教乙", "复核后不计分"]),
                           ("2023100002", ["复核后计入", "助教甲"]), ("2023100004", ["评分失败", "不是 0 分"]),
                           ("2023100007", ["未能收取", "作业1.pdf"]), ("2023100008", ["未提交", "不是 0 分"])):
            browser.open((root / "feedback" / sid / A1 / "scoring.html").as_uri(), settle=1)
            text = browser.page.inner_text("body")
            assert all(w in text for w in words), (sid, [w for w in words if w not in text])
            box = browser.page.query_selector("#course-outcome")
            assert box is not None and box.bounding_box()["y"] < 800, f"{sid}: the outcome is below the fold"
    rejected = (root / "feedback" / "2023100003" / A1 / "scoring.html").read_text(encoding="utf-8")
    assert 'class="verdict withheld"' in rejected  # every test after the hold: no 通过 beside withheld points
    assert 'class="verdict pass"' not in rejected


def test_the_report_is_readable_at_1280(moodle):
    """Long reasons wrap in the last column; 学号, 姓名, 状态 and 得分 stay on one line."""
    root, _ = moodle
    with Browser() as browser:
        browser.open((root / "build" / "report" / "report.html").as_uri(), settle=1)
        lines = browser.evaluate("""() => [...document.querySelectorAll('table')]
            .filter(t => [...t.querySelectorAll('th')].map(th => th.textContent).join('|').startsWith('学号|姓名|状态|得分'))
            .flatMap(t => [...t.querySelectorAll('tbody tr')].map(tr => [...tr.children].slice(0, 4).map(td => {
                const range = document.createRange();
                range.selectNodeContents(td);
                return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;  // lines of text
            })))""")
        assert len(lines) == len(ROSTER), lines
        assert max(max(row) for row in lines) == 1, lines
        width = browser.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 1280, f"the report is {width} px wide"


@pytest.fixture(scope="module")
def canvas(tmp_path_factory):
    """A Canvas-style flat download: a zip-only upload, a document, and a roster student with nothing."""
    tmp = tmp_path_factory.mktemp("canvas")
    root = copy_course(tmp / "canvas")
    _configure(root, "canvas", "id,first_name,last_name,email,lms_id\n2023200001,一,郑,,61001\n"
                               "2023200002,二,冯,,61002\n2023200003,三,陈,,61003\n")
    course(root, "release", A1)
    full, _ = _notebooks(root)
    download = tmp / "canvas.zip"
    download.write_bytes(zip_bytes([("zhengyi_61001_700001_作业1.zip", zip_bytes([("scoring.ipynb", full)])),
                                     ("fenger_LATE_61002_700002_实验报告.docx", b"PK-not-a-notebook")]))
    course(root, "collect", str(download), "--assignment", A1)
    course(root, "grade", A1)
    for step in ("feedback", "report", "export"):
        course(root, step)
    return root


def test_a_canvas_class_has_one_outcome_per_student_too(canvas):
    found = _one_outcome_everywhere(canvas, {"2023200001": "郑一", "2023200002": "冯二", "2023200003": "陈三"})
    assert found == {"2023200001": Status.GRADED, "2023200002": Status.NOT_COLLECTED, "2023200003": Status.MISSING}
