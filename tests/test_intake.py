"""Taking submissions in: staging a class folder and collecting an LMS download, on real files and zip bytes."""
import json
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attncourse.grading.intake import lms, matching, reading, staging


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




# --- reading: the files editors write ---------------------------------------------------------------------------

def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _raw(released, **changes):
    raw = json.loads(nbformat.writes(released["work.ipynb"]))
    raw.update(changes)
    return raw


@pytest.mark.parametrize("editor, change, note", [
    ("JupyterLab 4", lambda raw: raw, None),
    ("Windows tool with a BOM", "bom", "BOM"),
    ("VS Code transient output", lambda raw: raw["cells"][0].update(outputs=[
        {"output_type": "stream", "name": "stdout", "text": "1\n", "transient": {"display_id": "x"}}]), "transient"),
    ("markdown cell with outputs", lambda raw: raw["cells"].append(
        {"cell_type": "markdown", "metadata": {}, "source": "x", "outputs": [], "execution_count": None}), "非代码"),
    ("Colab nbformat 4.0 without ids", lambda raw: (raw.update(nbformat_minor=0), [c.pop("id", None) for c in raw["cells"]]),
     None),
    ("cell without metadata", lambda raw: raw["cells"][0].pop("metadata"), "元数据"),
    ("invalid beyond repair", lambda raw: raw["cells"][0].update(cell_type="code", outputs=[{"output_type": "bogus"}]),
     "重建"),
])
def test_files_editors_write_are_read(tmp_path, released, editor, change, note):
    raw = _raw(released)
    if callable(change):
        change(raw)
    text = json.dumps(raw, indent=2 if "PyCharm" in editor else 1)
    data = b"\xef\xbb\xbf" + text.encode() if change == "bom" else text
    nb, notes = reading.read(_write(tmp_path, "work.ipynb", data))
    assert nb is not None, notes
    assert nb.cells[0].source == "x = 1"
    assert (note is None and notes == []) or any(note in n for n in notes), notes


@pytest.mark.parametrize("data, words", [(b"{broken", "JSON"), (b"\xff\xfe\x00\x01", "不是文本"),
                                         (b'{"a": 1}', "不是 Jupyter notebook")])
def test_what_is_not_a_notebook_gets_a_specific_reason(tmp_path, data, words):
    nb, notes = reading.read(_write(tmp_path, "work.ipynb", data))
    assert nb is None and words in notes[0]


def test_outputs_do_not_count_against_the_size_limit_and_the_students_run_is_kept(tmp_path, released, monkeypatch):
    monkeypatch.setattr(reading, "MAX_NOTEBOOK_BYTES", 5000)
    raw = _raw(released)
    raw["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * 100_000},
                                  {"output_type": "display_data", "metadata": {},
                                   "data": {"text/plain": "<Figure>", "image/png": "iVBOR" * 10}}]
    nb, notes = reading.read(_write(tmp_path, "work.ipynb", json.dumps(raw)))
    assert nb is not None and nb.cells[0].outputs == []
    kept = nb.cells[0].metadata[reading.SUBMITTED_OUTPUTS]
    assert len(kept[0]["text/plain"]) == reading.MAX_KEPT_TEXT and kept[1] == {"image/png": "iVBOR" * 10}


# --- matching: metadata found again, tests in released order -----------------------------------------------------

def _assignment():
    def meta(gid, **kw):
        return {"nbgrader": {"grade_id": gid, "grade": False, "solution": False, "locked": False,
                             "schema_version": 3, **kw}}
    from nbformat.v4 import new_markdown_cell
    return new_notebook(cells=[
        new_markdown_cell("## 1. 实现 f"), new_code_cell("# 请在此处编写你的代码\nraise NotImplementedError()",
                                                          metadata=meta("f", solution=True)),
        new_code_cell("assert f(1) == 2", metadata=meta("test_f", grade=True, locked=True, points=1)),
        new_markdown_cell("## 2. 实现 g"), new_code_cell("# 请在此处编写你的代码\nraise NotImplementedError()",
                                                          metadata=meta("g", solution=True)),
        new_code_cell("assert g(1) == 3", metadata=meta("test_g", grade=True, locked=True, points=1))])


def test_a_notebook_without_metadata_is_matched_by_its_cells():
    released = _assignment()
    pasted = nbformat.reads(nbformat.writes(released), as_version=4)
    for cell in pasted.cells:
        cell.metadata = {}
    pasted.cells[1].source, pasted.cells[4].source = "def f(x):\n    return 2 * x", "def g(x):\n    return x + 2"
    count, missing = matching.match_cells(pasted, released)
    assert missing == [] and count == 4
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in pasted.cells] == \
        [None, "f", "test_f", None, "g", "test_g"]


def test_a_notebook_that_cannot_be_matched_is_refused_with_what_is_missing(tmp_path):
    released = {"work.ipynb": _assignment()}
    alone = new_notebook(cells=[new_code_cell("print(1)")])
    intake = staging.stage(_submit(tmp_path, "s", {"work.ipynb": nbformat.writes(alone)}), tmp_path / "st", "a",
                           released)
    assert "没有评分所需的单元格标记" in intake.reason and "找不到答案单元格" in intake.reason


def test_test_cells_run_in_released_order():
    released = _assignment()
    moved = nbformat.reads(nbformat.writes(released), as_version=4)
    test_f = moved.cells.pop(2)
    moved.cells.append(test_f)  # test_f after g: a reference swapped in for g could answer f
    del moved.cells[4]  # test_g deleted
    extra = new_code_cell("helper = 1")
    moved.cells.insert(2, extra)  # the student's own cell between f and its test stays before it
    assert matching.put_tests_in_order(moved, released) == 2
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") or c.source for c in moved.cells]
    assert ids.index("f") < ids.index("helper = 1") < ids.index("test_f") < ids.index("g") < ids.index("test_g")


# --- collect: an LMS download, as zip bytes ---------------------------------------------------------------------

def _lms_course(tmp_path):
    import shutil

    from conftest import ROOT
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    return root


def raw_zip(path, entries):
    """A zip whose entry names are the given bytes, as an archiver wrote them: `(name_bytes, data, date_time,
    utf8_flag, extra)`. zipfile writes ASCII placeholders of the same length, patched afterwards."""
    import struct
    import zipfile
    placeholders = []
    with zipfile.ZipFile(path, "w") as z:
        for k, (name, data, when, utf8, extra) in enumerate(entries):
            placeholder = f"{k:04d}".encode() + b"#" * (len(name) - 4)
            info = zipfile.ZipInfo(placeholder.decode(), date_time=when)
            info.extra = extra
            z.writestr(info, data)
            placeholders.append((placeholder, name, utf8))
    blob = path.read_bytes()
    for placeholder, name, _utf8 in placeholders:
        assert blob.count(placeholder) == 2
        blob = blob.replace(placeholder, name)
    if any(utf8 for _, _, utf8 in placeholders):  # set bit 11 in the local and central headers of those entries
        blob = bytearray(blob)
        for _placeholder, name, utf8 in placeholders:
            start = 0
            while utf8 and (at := blob.find(name, start)) != -1:
                header = blob.rfind(b"PK\x03\x04", 0, at)
                central = blob.rfind(b"PK\x01\x02", 0, at)
                offset = 6 if header > central else 8  # general purpose flag
                base = max(header, central)
                flags = struct.unpack_from("<H", blob, base + offset)[0] | 0x800
                struct.pack_into("<H", blob, base + offset, flags)
                start = at + 1
        blob = bytes(blob)
    path.write_bytes(blob)
    return path


def unicode_path_extra(raw_name, name):
    import struct
    import zlib
    utf8 = name.encode("utf-8")
    return struct.pack("<HHB", 0x7075, 5 + len(utf8), 1) + struct.pack("<I", zlib.crc32(raw_name)) + utf8


NAMES = {"张三": "2023000001", "欧阳娜娜": "2023000002", "昞明": "2023000003", "李四": "2023000004",
         "王五": "2023000005"}


@pytest.mark.parametrize("archiver", ["utf8-flag", "gbk-windows", "utf8-no-flag", "unicode-path-field"])
def test_zip_names_are_decoded_whatever_the_archiver(tmp_path, released, archiver):
    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.intake import collect
    root = _lms_course(tmp_path)
    nb = nbformat.writes(released["work.ipynb"])
    entries = []
    for full, sid in NAMES.items():
        name = f"{sid}_{full}_work.ipynb"
        raw = name.encode("utf-8" if archiver in ("utf8-flag", "utf8-no-flag") else "gbk")
        extra = unicode_path_extra(raw, name) if archiver == "unicode-path-field" else b""
        entries.append((raw, nb, (2026, 10, 9, 20, 0, 0), archiver == "utf8-flag", extra))
    assert b"\\" in "昞".encode("gbk")  # a GBK character whose second byte is '\\'
    result = collect.collect(nbgrader_config(root), root, raw_zip(tmp_path / "lms.zip", entries), "a",
                             ["work.ipynb"])
    assert result.unmatched == [] and sorted(t[0] for t in result.taken) == sorted(NAMES.values())
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        got = {s.id: f"{s.last_name}{s.first_name}" for s in gb.students}
    assert got == {sid: full for full, sid in NAMES.items()}


def test_cp437_names_of_old_archivers_are_read_when_configured(tmp_path):
    import zipfile
    path = raw_zip(tmp_path / "old.zip", [("Renée_work.ipynb".encode("cp437"), "{}", (2026, 1, 1, 0, 0, 0), False, b"")])
    with zipfile.ZipFile(path) as z:
        assert lms.entry_name(z.infolist()[0], "cp437") == "Renée_work.ipynb"


def test_collect_takes_each_students_latest_upload(tmp_path, released, monkeypatch):
    from nbgrader.api import Gradebook

    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.intake import collect
    root = _lms_course(tmp_path)
    monkeypatch.setattr(lms, "MAX_FILE_BYTES", 5000)
    nb = nbformat.writes(released["work.ipynb"])
    blank = nb.replace("x = 1", "x = 0")
    minute, later = (2026, 10, 9, 20, 0, 0), (2026, 10, 9, 21, 0, 0)
    download = raw_zip(tmp_path / "lms.zip", [(n.encode(), data, when, True, b"") for n, data, when in [
        ("2023000001_张三_work.ipynb", nb, minute),
        ("2023000002_欧阳娜娜_work.ipynb", blank, minute),  # blank, then the answer in the same minute
        ("2023000002_欧阳娜娜_work (1).ipynb", nb, minute),
        ("2023000003_李四_work.ipynb", blank, minute),  # a later file with another name
        ("2023000003_李四_work-final.ipynb", nb, later),
        ("2023000004_王五_work（1）.ipynb", nb, minute),
        ("2023000004_王五_work.ipynb", blank, minute),
        ("2023000005_赵六_work.ipynb", "x" * 6000, minute),  # too large: listed, the rest collected
        ("2023000006_钱七/work.ipynb", nb, minute),  # a folder per student
        ("作业1-最终版.ipynb", nb, minute)]])
    result = collect.collect(nbgrader_config(root), root, download, "a", ["work.ipynb"])
    assert sorted(t[0] for t in result.taken) == ["2023000001", "2023000002", "2023000003", "2023000004",
                                                  "2023000006"]
    assert sorted(n for n, _ in result.unmatched) == ["2023000005_赵六_work.ipynb", "作业1-最终版.ipynb"]
    for sid in ("2023000002", "2023000003", "2023000004"):
        assert (root / "submitted" / sid / "a" / "work.ipynb").read_text(encoding="utf-8") == nb, sid
    assert any("2023000003 交了 2 份" in n and "work-final.ipynb" in n and "放在一边" in n for n in result.notes)
    stamp = (root / "submitted" / "2023000003" / "a" / "timestamp.txt").read_text()
    assert stamp.startswith("2026-10-09 13:00:00") and stamp.endswith("UTC")  # 21:00 in Asia/Shanghai
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert (gb.find_student("2023000006").last_name, gb.find_student("2023000006").first_name) == ("钱", "七")


@pytest.mark.parametrize("text, utc", [
    ("2016-01-30-15-00-00", "2016-01-30 07:00:00"),  # nbgrader's documented example, read in Asia/Shanghai
    ("2016-01-30 15:30:10 UCT", "2016-01-30 15:30:10"),  # nbgrader's plugin docstring (sic: UCT)
    ("2016-01-30 15:30:10 UTC", "2016-01-30 15:30:10"),
    ("2016-01-30T15:30:10Z", "2016-01-30 15:30:10"),
    ("2016-01-30T15:30:10+08:00", "2016-01-30 07:30:10"),
    ("20160130153010", "2016-01-30 07:30:10"),
    ("2016-01-30 15:30", "2016-01-30 07:30:00"),
])
def test_upload_times_in_file_names_are_parsed_exactly(text, utc):
    plugin = lms.LMSFileNames(timezone="Asia/Shanghai")
    assert f"{plugin.parse_time(text):%Y-%m-%d %H:%M:%S}" == utc
    assert lms.LMSFileNames(timezone="UTC").parse_time("not a time") is None
