"""An ordinary honest class (catalog/honest.py: 42 students, correct answers in several styles, six editors,
Windows and UTF-8 zips, a folder per student, double and late uploads, the usual harmless habits, screenshots
pasted into the written answer (some lost by the editor), a part dragged above another), collected
and graded by the semester commands: every honest student gets exactly the clean answer's points, nothing is
held, no self-check costs a point, names are right in the gradebook and the export, and feedback is published.
"""
import csv
import importlib.util

import pytest
from nbgrader.api import Gradebook

from conftest import ROOT, auto_points, copy_course, course

pytestmark = pytest.mark.slow

A1 = "a1_scoring"


SPEC = importlib.util.spec_from_file_location("honest", ROOT / "catalog" / "honest.py")
HONEST = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(HONEST)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("honest"))
    course(root, "release", A1)
    honest = HONEST
    downloads, students = honest.write_downloads(root, root / "downloads")
    collected = [course(root, "collect", str(d), "--assignment", A1).stdout for d in downloads]
    grade = course(root, "grade", A1).stdout
    course(root, "feedback")
    course(root, "report")
    course(root, "export", "--to", "build/lms.csv")
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    with open(root / "build" / "lms.csv", encoding="utf-8-sig") as f:
        lms = {r["学号"]: r for r in csv.DictReader(f)}
    return root, students, collected, grade, rows, lms


def test_the_class_is_realistic(graded):
    _, students, _, _, _, _ = graded
    assert len(students) >= 40
    assert {s["editor"] for s in students.values()} == {"jupyterlab", "notebook6", "vscode", "pycharm", "colab",
                                                       "windows"}
    assert len({s["style"] for s in students.values()}) >= 4 and len({s["habit"] for s in students.values()}) >= 7
    assert {s["screenshot"] for s in students.values()} == {"", "pasted", "not saved"}
    assert any(s["dragged"] for s in students.values()) and any(s["load_ext"] for s in students.values())


def test_an_extension_the_grader_lacks_fails_its_own_cell_and_holds_nothing(graded):
    """(Their points: below.) The cell that loads it fails as any import error does, in the grader's run."""
    import nbformat
    root, students, _, _, rows, _ = graded
    loading = [sid for sid, info in students.items() if info["load_ext"]]
    assert loading
    for sid in loading:
        nb = nbformat.read(next((root / "autograded" / sid / A1).glob("*.ipynb")), as_version=4)
        cell = next(c for c in nb.cells if c.source == HONEST.LOAD_EXT)
        assert [o.get("ename") for o in cell.outputs if o.output_type == "error"] == ["ModuleNotFoundError"], sid
        assert not rows[sid]["review"], rows[sid]


def test_a_lost_screenshot_and_a_dragged_part_are_noted_and_cost_nothing(graded):
    """(Their points: the next test.) The notes say what intake repaired; the pasted screenshot that was saved
    reaches the student's feedback."""
    root, students, _, _, rows, _ = graded
    for sid, info in students.items():
        note = rows[sid]["notes"]
        assert ("粘贴图片 image.png 不在文件中" in note) == (info["screenshot"] == "not saved"), (sid, note)
        assert ("按发布时的顺序评分" in note) == info["dragged"], (sid, note)
    pasted = next(sid for sid, info in students.items() if info["screenshot"] == "pasted")
    page = next((root / "feedback" / pasted).rglob("*.html")).read_text(encoding="utf-8")
    assert HONEST.IMAGE["data"]["image/png"] in page, "the pasted screenshot is not in the feedback"


def test_every_upload_is_collected_under_the_right_student(graded):
    root, students, collected, _, _, _ = graded
    assert sorted(p.name for p in (root / "submitted").iterdir()) == sorted(students)
    unmatched = [line for out in collected for line in out.splitlines() if "未收集" in line]
    assert unmatched == []  # macOS's __MACOSX entries are the archiver's, not uploads


def test_every_honest_student_gets_the_clean_answers_points_and_nothing_is_held(graded):
    root, students, _, grade, rows, _ = graded
    assert set(rows) == set(students)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        clean = None
        wrong = []
        for sid, info in students.items():
            row = rows[sid]
            sub = gb.find_submission(A1, sid)
            auto = sum(g.auto_score or 0 for nb in sub.notebooks for g in nb.grades if g.cell.cell_type == "code"
                       and g.cell.name not in {c.name for c in nb.notebook.solution_cells})
            maximum = sum(g.max_score for nb in sub.notebooks for g in nb.grades if g.cell.cell_type == "code"
                          and g.cell.name not in {c.name for c in nb.notebook.solution_cells})
            clean = clean or maximum
            if row["status"] != "graded" or auto != maximum or row["review"] or row["withheld_for_review"] != "0":
                wrong.append(f"{sid} ({info}): {row['status']} {auto}/{maximum} held {row['withheld_for_review']}"
                             f" review {row['review']!r} reason {row['reason']!r}")
    assert clean and not wrong, "\n".join(wrong)
    assert "⚠" not in grade


def test_names_are_right_in_the_gradebook_and_the_export(graded):
    root, students, _, _, _, lms = graded
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        names = {s.id: f"{s.last_name}{s.first_name}" for s in gb.students}
    assert names == {sid: info["name"] for sid, info in students.items()}
    assert {sid: row["姓名"] for sid, row in lms.items()} == names
    clean = auto_points(A1)
    assert lms and all(float(row[A1]) == clean and "待复核" not in row["说明"] for row in lms.values()), \
        [row for row in lms.values() if float(row[A1]) != clean][:3]


def test_feedback_is_published_for_everyone(graded):
    root, students, _, _, _, _ = graded
    assert sorted(p.parent.parent.name for p in (root / "feedback").rglob("*.html")) == sorted(students)
