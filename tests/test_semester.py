"""A semester with a real class, end to end, through the `course` commands an instructor runs:
release → collect an LMS download → grade → grade a written answer by hand → an edited source is refused →
collect late submissions → grade again → feedback, report, export → bundle for students, used in a fresh
virtual environment. The README's instructor section walks through the same steps.
"""
import csv
import datetime
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.course import copy_course_files
from attncourse.grading.publish.feedback import _message_line
from attncourse.grading.release import student_version as release

from conftest import ROOT, auto_points, copy_course, course

pytestmark = pytest.mark.slow

A1, A2 = "a1_scoring", "a2_multihead"
NAMES = ["张三", "李四", "王五", "赵六", "钱七", "孙八", "周九", "吴十", "郑一", "欧阳娜娜", "冯二", "陈三"]
IDS = [f"20231234{i:02d}" for i in range(len(NAMES))]


def answers(root, assignment):
    """Notebooks a class hands in: the reference answer, the lecturer's code, and two catalogued mistakes."""
    catalog = load_catalog(root, assignment)
    src = source_notebook(root, assignment, catalog)
    rel = nbformat.read(root / "release" / assignment / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    bug = next(v for v in catalog.VARIANTS if not v.get("needs_cuda"))
    return {"full": answered(rel, src), "lecturer": answered(rel, src, catalog.LECTURER),
            "buggy": answered(rel, src, bug.get("cells"), bug.get("edits")), "blank": rel}


def lms_zip(path, entries):
    """A zip as an LMS hands it out: `学号_姓名_<notebook>` files, each with the time it was uploaded."""
    with zipfile.ZipFile(path, "w") as z:
        for name, nb, when in entries:
            info = zipfile.ZipInfo(name, date_time=when.timetuple()[:6])
            z.writestr(info, nbformat.writes(nb))
    return path


@pytest.fixture(scope="module")
def semester(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("semester")
    root = copy_course(tmp / "course")
    # the course folder builds the students' wheel
    copy_course_files(ROOT, root, ["pyproject.toml", "constraints.txt", "src"])
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text() + "\nc.Execute.timeout = 10\n")
    log = {}

    log["release"] = course(root, "release", A1, A2)
    a1 = answers(root, A1)
    day = datetime.datetime(2026, 10, 9, 20, 0)
    entries = [(f"{sid}_{name}_scoring.ipynb", a1["lecturer" if i % 3 == 1 else "full"], day)
               for i, (sid, name) in enumerate(zip(IDS[:10], NAMES[:10], strict=True))]
    entries += [  # two students submitted twice: the later upload counts, whatever its name
        (f"{IDS[10]}_{NAMES[10]}_scoring.ipynb", a1["full"], day),
        (f"{IDS[10]}_{NAMES[10]}_scoring (1).ipynb", a1["buggy"], day + datetime.timedelta(hours=1)),
        (f"{IDS[11]}_{NAMES[11]}_scoring.ipynb", a1["buggy"], day),
        (f"{IDS[11]}_{NAMES[11]}_scoring (1).ipynb", a1["full"], day + datetime.timedelta(hours=2)),
        ("作业1-最终版.ipynb", a1["full"], day),  # badly named: nobody's
    ]
    log["collect"] = course(root, "collect", str(lms_zip(tmp / "lms.zip", entries)), "--assignment", A1)
    log["collected"] = sorted(p.name for p in (root / "submitted").iterdir())
    log["grade"] = course(root, "grade", A1)

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:  # a TA grades one written answer in formgrader
        grade = gb.find_grade("why_scale", "scoring", A1, IDS[0])
        grade.manual_score = 1.5
        gb.db.commit()

    source = root / "source" / A1 / "scoring.ipynb"
    log["released_before"] = (root / release.RECORD).read_text()
    edited = nbformat.read(source, as_version=4)  # the instructor rewords the instructions mid-semester
    edited.cells[1].source += "\n\n（补充说明：本作业在发布后修改过。）"
    nbformat.write(edited, source)
    log["release_again"] = course(root, "release", A1, check=False)

    late = [(f"{IDS[2]}_{NAMES[2]}_scoring.ipynb", a1["buggy"], day + datetime.timedelta(days=1)),  # resubmits
            ("2023999901_刘迟到_scoring.ipynb", a1["full"], day + datetime.timedelta(days=1)),
            ("2023999902_黄迟到_scoring.ipynb", a1["blank"], day + datetime.timedelta(days=1)),
            (f"{IDS[5]}_{NAMES[5]}_scoring.ipynb", a1["buggy"], day - datetime.timedelta(days=1))]  # older copy
    log["collect_late"] = course(root, "collect", str(lms_zip(tmp / "late.zip", late)), "--assignment", A1)
    log["grade_again"] = course(root, "grade", A1)
    log["feedback"] = course(root, "feedback")
    log["report"] = course(root, "report")
    log["export"] = course(root, "export", "--to", "build/lms.csv")
    log["bundle"] = course(root, "bundle", A1)
    return root, tmp, log


def _csv(path):
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path} has no rows"
    return rows


def test_release_records_a_checksum_per_notebook(semester):
    root, _, log = semester
    record = json.loads((root / release.RECORD).read_text())
    assert set(record) == {A1, A2}
    for aid in (A1, A2):
        released = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "release" / aid).glob("*.ipynb")}
        assert released and record[aid]["release"] == released


def test_collect_takes_the_latest_upload_and_reports_what_it_could_not_match(semester):
    root, _, log = semester
    out = log["collect"].stdout
    assert "作业1-最终版.ipynb" in out and "未收集" in out
    assert log["collected"] == sorted(IDS)
    assert out.count("评分用最新的") == 2
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert (gb.find_student(IDS[9]).last_name, gb.find_student(IDS[9]).first_name) == ("欧阳", "娜娜")
        assert (gb.find_student(IDS[0]).last_name, gb.find_student(IDS[0]).first_name) == ("张", "三")


def test_an_edited_source_is_not_released_over_submitted_work(semester):
    root, _, log = semester
    again = log["release_again"]
    assert again.returncode != 0 and "已有" in again.stderr and "--force" in again.stderr
    assert (root / release.RECORD).read_text() == log["released_before"]


def test_late_submissions_are_collected_and_earlier_ones_kept(semester):
    root, _, log = semester
    out = log["collect_late"].stdout
    assert "替换了之前的" in out and (root / "submitted_earlier" / IDS[2] / A1).is_dir()
    assert f"{IDS[5]}：已收集的提交" in out  # an older copy does not replace a newer one
    assert (root / "submitted" / "2023999901" / A1 / "scoring.ipynb").exists()


def test_grading_again_keeps_grades_and_the_manual_grade(semester):
    root, _, log = semester
    lines = {m.group(1): m.group(2) for m in re.finditer(r"a1_scoring\s+(\S+)\s+([✔＝✘])", log["grade_again"].stdout)}
    assert lines, log["grade_again"].stdout[-2000:]
    assert {s for s, mark in lines.items() if mark == "＝"} == set(IDS) - {IDS[2]}, "unchanged work must be kept"
    assert {s for s, mark in lines.items() if mark == "✔"} == {IDS[2], "2023999901", "2023999902"}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert gb.find_grade("why_scale", "scoring", A1, IDS[0]).manual_score == 1.5
    rows = {r["student"]: r for r in _csv(root / "build" / "grades.csv")}
    clean = auto_points(A1)
    assert float(rows[IDS[0]]["score"]) == clean + 1.5 and rows[IDS[0]]["pending_manual"] == "0"
    assert float(rows["2023999901"]["score"]) == clean and float(rows["2023999902"]["score"]) == 0
    assert float(rows[IDS[2]]["score"]) < clean and float(rows[IDS[11]]["score"]) == clean > float(rows[IDS[10]]["score"])


def test_feedback_report_and_lms_export(semester):
    root, _, log = semester
    pages = sorted((root / "feedback").rglob("*.html"))
    assert len(pages) == len(IDS) + 2
    assert (root / "build" / "report" / "report.html").read_text(encoding="utf-8").count("<img") >= 2
    lms = {r["学号"]: r for r in _csv(root / "build" / "lms.csv")}
    assert set(lms) == set(IDS) | {"2023999901", "2023999902"}
    assert lms[IDS[0]]["姓名"] == "张三" and float(lms[IDS[0]][A1]) == auto_points(A1) + 1.5 and lms[IDS[0]][A2] == ""
    assert "待人工评分" in lms[IDS[1]]["说明"]


def test_the_likely_mistake_reaches_the_feedback_and_the_report(semester):
    """The two students whose counted upload has the catalog's first mistake (a misconception) read its label
    and hint under the failed question; the class report ranks it; nobody else is named."""
    root, _, log = semester
    catalog = load_catalog(root, A1)
    bug = next(v for v in catalog.VARIANTS if not v.get("needs_cuda"))
    label, hint, slide = catalog.MISCONCEPTIONS[bug["id"]]
    pages = {p.relative_to(root / "feedback").parts[0]: p.read_text(encoding="utf-8")
             for p in (root / "feedback").rglob("*.html")}
    assert pages, "no feedback pages"
    buggy = {IDS[2], IDS[10]}  # IDS[2]'s late upload and IDS[10]'s later one have the mistake
    assert {sid for sid, page in pages.items() if "可能的原因" in page} == buggy
    shown = _message_line(hint)  # as the page shows it (escaped, code between backticks as code)
    assert all(label in pages[sid] and shown in pages[sid] and slide in pages[sid] for sid in buggy)
    rows = _csv(root / "build" / "misconceptions.csv")
    assert {r["student"] for r in rows} == buggy and {r["label"] for r in rows} == {label}
    assert {r["question"] for r in rows} <= set(bug["caught_by"])
    report = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    assert "常见错误" in report and f"| {label} | 2 |" in report


def test_the_student_bundle_works_in_a_fresh_environment_and_leaks_nothing(semester, tmp_path):
    root, _, log = semester
    bundle = root / "build" / "student" / f"{A1}.zip"
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        assert f"{A1}/{A1}/scoring.ipynb" in names and f"{A1}/README.md" in names
        assert not [n for n in names if "source" in n.split("/") or "catalog" in n.split("/") or "gradebook" in n]
        z.extractall(tmp_path)
    hand_out = tmp_path / A1
    release.check_release(root / "source" / A1 / "scoring.ipynb", hand_out / A1 / "scoring.ipynb")
    wheel = next(hand_out.glob("attncourse-*.whl"))
    # A fresh environment whose dependencies are the grader's (installing torch from PyPI would take minutes):
    # their packages through a .pth file, their data files (JupyterLab extensions, server config) copied.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "course-deps.pth").write_text(str(next(Path(sys.prefix).glob("lib/python3*/site-packages"))) + "\n")
    for folder in ("etc", "share"):
        shutil.copytree(Path(sys.prefix) / folder, venv / folder, dirs_exist_ok=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    where = subprocess.run([python, "-c", "import attncourse; print(attncourse.__file__)"], capture_output=True,
                           text=True, check=True).stdout
    assert where.startswith(str(venv)), "the bundle's attncourse must be the one imported"
    setup = subprocess.run([python, "-m", "attncourse.student"], capture_output=True, text=True)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    listing = subprocess.run([python, "-m", "jupyterlab.labextensions", "list"], capture_output=True, text=True)
    disabled = listing.stdout + listing.stderr
    assert "@jupyter/nbgrader:formgrader" in disabled and "@jupyter/nbgrader:create-assignment" in disabled
    assert "@jupyter/nbgrader:validate-assignment" in disabled  # the course's Chinese Validate replaces it
    blank = subprocess.run([python, "-m", "nbgrader", "validate", f"{A1}/scoring.ipynb"], cwd=hand_out,
                           capture_output=True, text=True)
    assert "通过 0，未通过 0，未作答 7" in blank.stdout, blank.stdout[-2000:] + blank.stderr[-2000:]
    nbformat.write(answers(root, A1)["full"], hand_out / A1 / "scoring.ipynb")
    solved = subprocess.run([python, "-m", "nbgrader", "validate", f"{A1}/scoring.ipynb"], cwd=hand_out,
                            capture_output=True, text=True)
    assert "所有自动检查的题目都通过了可见测试" in solved.stdout, solved.stdout[-2000:] + solved.stderr[-2000:]
