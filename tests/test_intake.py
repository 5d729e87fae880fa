"""Taking submissions in: staging a class folder and collecting an LMS download, on real files and zip bytes."""
import json
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attncourse.grading.intake import staging



@pytest.fixture
def released():
    nb = new_notebook(cells=[new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "test_x", "locked": True, "points": 1, "schema_version": 3, "solution": False}})])
    return {"work.ipynb": nb}


def _submit(tmp_path, student, files):
    folder = tmp_path / "class" / student / "a"
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_text(content, encoding="utf-8")
    return folder


def test_intake_refuses_unsafe_ids_and_symlinks(tmp_path, released):
    nb = nbformat.writes(released["work.ipynb"])
    for student in ("学生*甲", "a b", "-rf"):
        assert "学生编号" in staging.stage(_submit(tmp_path, student, {"work.ipynb": nb}), tmp_path / "s", "a",
                                         released).reason
    folder = _submit(tmp_path, "linker", {"work.ipynb": nb})
    os.symlink("/etc/passwd", folder / "notes.txt")
    assert "符号链接" in staging.stage(folder, tmp_path / "s2", "a", released).reason


def test_intake_renames_a_single_notebook_and_sets_extra_ones_aside(tmp_path, released):
    nb = nbformat.writes(released["work.ipynb"])
    renamed = staging.stage(_submit(tmp_path, "s1", {"work (1).ipynb": nb}), tmp_path / "s1", "a", released)
    assert renamed.reason == "" and (renamed.folder / "work.ipynb").exists() and "work (1).ipynb" in renamed.notes[0]
    extra = staging.stage(_submit(tmp_path, "s2", {"work.ipynb": nb, "old.ipynb": "{broken"}), tmp_path / "s2",
                          "a", released)
    assert extra.reason == "" and "old.ipynb" in extra.notes[0] and not (extra.folder / "old.ipynb").exists()
    broken = staging.stage(_submit(tmp_path, "s3", {"work.ipynb": "{broken"}), tmp_path / "s3", "a", released)
    assert "损坏" in broken.reason
    none = staging.stage(_submit(tmp_path, "s4", {"a.ipynb": nb, "b.ipynb": nb}), tmp_path / "s4", "a", released)
    assert "找不到 work.ipynb" in none.reason


def test_intake_restores_grading_metadata(tmp_path, released):
    nb = released["work.ipynb"]
    tampered = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    tampered.cells[0].metadata["nbgrader"].update(solution=True, locked=False, points=100)
    tampered.cells.append(new_code_cell("y = 2", metadata={"nbgrader": {"grade": True, "grade_id": "invented"}}))
    tampered.cells.insert(0, nbformat.from_dict(json.loads(json.dumps(tampered.cells[0]))))
    intake = staging.stage(_submit(tmp_path, "s", {"work.ipynb": nbformat.writes(tampered)}), tmp_path / "st",
                           "a", released)
    staged = nbformat.read(intake.folder / "work.ipynb", as_version=4)
    assert [c.metadata.get("nbgrader") for c in staged.cells] == [None, nb.cells[0].metadata["nbgrader"], None]
    assert intake.notes




# --- collect: an LMS download, as zip bytes ---------------------------------------------------------------------

def _lms_course(tmp_path):
    import shutil

    from conftest import ROOT
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    return root


def _zip(path, entries):
    """A zip as an LMS hands it out: (name, text, (y, m, d, h, min, s)) per file."""
    import zipfile
    with zipfile.ZipFile(path, "w") as z:
        for name, text, when in entries:
            z.writestr(zipfile.ZipInfo(name, date_time=when), text)
    return path


def test_collect_takes_each_students_latest_upload_from_zip_bytes(tmp_path, released):
    from nbgrader.api import Gradebook

    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.intake import collect
    root = _lms_course(tmp_path)
    nb = nbformat.writes(released["work.ipynb"])
    download = _zip(tmp_path / "lms.zip", [
        ("2023000001_张三_work.ipynb", nb, (2026, 10, 9, 20, 0, 0)),
        ("2023000002_欧阳娜娜_work.ipynb", nb.replace("x = 1", "x = 0"), (2026, 10, 9, 20, 0, 0)),
        ("2023000002_欧阳娜娜_work (1).ipynb", nb, (2026, 10, 9, 21, 0, 0)),
        ("作业1-最终版.ipynb", nb, (2026, 10, 9, 20, 0, 0))])
    result = collect.collect(nbgrader_config(root), root, download, "a", ["work.ipynb"])
    assert sorted(s for s, _, _ in result.taken) == ["2023000001", "2023000002"]
    assert [name for name, _ in result.unmatched] == ["作业1-最终版.ipynb"]
    kept = root / "submitted" / "2023000002" / "a"
    assert (kept / "work.ipynb").read_text(encoding="utf-8") == nb and "21:00:00" in (kept / "timestamp.txt").read_text()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert (gb.find_student("2023000002").last_name, gb.find_student("2023000002").first_name) == ("欧阳", "娜娜")
