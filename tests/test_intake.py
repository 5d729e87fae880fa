"""Taking submissions in: staging a class folder and collecting an LMS download, on real files and zip bytes."""
import functools
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attncourse.grading.intake import lms, matching, reading, roster, staging

from conftest import zip_bytes


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
    ("invalid beyond repair", lambda raw: raw["cells"][0].update(cell_type="code", collapsed="bogus"), "重建"),
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


def test_a_notebook_is_parsed_once_and_nbformat_gets_it_without_its_outputs(tmp_path, released, monkeypatch):
    """A saved flood (300,000 lines of output, as JupyterLab saves a printing loop) is trimmed in the JSON as
    read: nbformat, which would build and validate the whole notebook again, only gets what is kept."""
    raw = _raw(released)
    raw["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["第 1 轮\n"] * 300_000}]
    path = _write(tmp_path, "work.ipynb", json.dumps(raw, ensure_ascii=False))
    given = []
    reads = reading.nbformat.reads
    monkeypatch.setattr(reading.nbformat, "reads", lambda text, **kw: given.append(len(text)) or reads(text, **kw))
    nb, notes = reading.read(path)
    assert nb is not None and given and max(given) < path.stat().st_size / 50
    assert len(nb.cells[0].metadata[reading.SUBMITTED_OUTPUTS][0]["text/plain"]) == reading.MAX_KEPT_TEXT


def test_pasted_images_the_file_does_not_carry_become_words_with_a_note(tmp_path):
    """A screenshot pasted into a written answer: kept when the file carries it as PNG or JPEG; a reference to one
    the editor did not save, or to a GIF, would stop nbconvert (`missing attachment`): it becomes words."""
    from nbformat.v4 import new_markdown_cell

    from attncourse.grading.safe_html import safe_markdown
    png = {"image/png": "iVBORw0KGgo="}
    cell = new_markdown_cell("如图 ![a](attachment:a.png)，还有 <img src='attachment:b.gif'> 和 ![c](<attachment:c d.png>)",
                             attachments={"a.png": png, "b.gif": {"image/gif": "R0lGOD"}})
    path = tmp_path / "work.ipynb"
    path.write_text(nbformat.writes(new_notebook(cells=[cell])), encoding="utf-8")
    nb, notes = reading.read(path)
    assert nb.cells[0].attachments == {"a.png": png}
    assert "![a](attachment:a.png)" in nb.cells[0].source and "attachment:b.gif" not in nb.cells[0].source
    assert [n for n in notes if "粘贴图片" in n] == [
        f"单元格 #1 显示的粘贴图片 {name} 不在文件中（编辑器没有保存它，或不是 PNG/JPEG），已换成文字说明"
        for name in ("b.gif", "c d.png")], notes
    assert safe_markdown(nb.cells[0].source) == nb.cells[0].source  # renders without nbconvert stopping


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


def test_a_part_dragged_above_another_is_graded_in_released_order(tmp_path):
    """The student dragged question 2 (its instructions, a helper of their own, the answer and its test) above
    question 1: each answer comes back with the cells just before it, each test after its answer, with a note."""
    released = _assignment()
    released.cells.insert(0, new_code_cell("import math", metadata={"nbgrader": {
        "grade_id": "imports", "grade": False, "solution": False, "locked": True, "schema_version": 3}}))
    dragged = nbformat.reads(nbformat.writes(released), as_version=4)
    dragged.cells[2].source, dragged.cells[5].source = "def f(x):\n    return 2 * x", "def g(x):\n    return helper(x)"
    part2 = dragged.cells[4:]
    part2.insert(1, new_code_cell("def helper(x):\n    return x + 2"))
    dragged.cells = dragged.cells[:1] + part2 + dragged.cells[1:4]  # the locked imports stay on top
    intake = staging.stage(_submit(tmp_path, "s", {"work.ipynb": nbformat.writes(dragged)}), tmp_path / "st", "a",
                           {"work.ipynb": released})
    assert intake.reason == "" and any("按发布时的顺序评分" in note for note in intake.notes), intake.notes
    staged = nbformat.read(intake.folder / "work.ipynb", as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") or c.source.splitlines()[0] for c in staged.cells]
    assert ids.index("imports") < ids.index("f") < ids.index("test_f") < ids.index("g") < ids.index("test_g"), ids
    assert ids.index("f") < ids.index("def helper(x):") < ids.index("g"), ids
    assert [c.source for c in staged.cells if c.metadata.get("nbgrader", {}).get("grade_id") in ("f", "g")] == \
        ["def f(x):\n    return 2 * x", "def g(x):\n    return helper(x)"]
    in_order = staging.stage(_submit(tmp_path, "t", {"work.ipynb": nbformat.writes(released)}), tmp_path / "st2", "a",
                             {"work.ipynb": released})
    assert not any("顺序" in note for note in in_order.notes), in_order.notes


# --- collect: an LMS download, as zip bytes ---------------------------------------------------------------------

@functools.cache
def _empty_gradebook() -> bytes:
    """An empty gradebook, made once: nbgrader reads alembic's scripts to make a new one (about 2 s)."""
    import tempfile

    from nbgrader.api import Gradebook
    with tempfile.TemporaryDirectory() as folder:
        Gradebook(f"sqlite:///{folder}/gradebook.db").close()
        return (Path(folder) / "gradebook.db").read_bytes()


def _lms_course(tmp_path):
    import shutil

    from conftest import ROOT
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    (root / "gradebook.db").write_bytes(_empty_gradebook())
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
        assert lms.archive_names(z.infolist(), "cp437") == ["Renée_work.ipynb"]


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


# --- whose work it is: what the LMS wrote, never what the student typed --------------------------------------------

def _collect(root, download, released=("work.ipynb",), others=None):
    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.intake import collect
    return collect.collect(nbgrader_config(root), root, download, "a", list(released), others)


def _zip(path, entries, when=(2026, 10, 9, 20, 0, 0)):
    """A UTF-8 zip of (name, data) or (name, data, date_time)."""
    return raw_zip(path, [(e[0].encode(), e[1], e[2] if len(e) > 2 else when, True, b"") for e in entries])


def _submitted(root, student):
    path = root / "submitted" / student / "a" / "work.ipynb"
    return path.read_text(encoding="utf-8") if path.exists() else None


VICTIM = "2023000002"
LATER = (2026, 10, 9, 23, 0, 0)
CLAIMS = {  # attacker -> their upload naming the victim, in their own LMS folder or after their own LMS prefix
    "2023000011": f"2023000011_张三/{VICTIM}_李四_work.ipynb",
    "2023000012": f"2023000012_王五/{VICTIM}_李四/work.ipynb",  # a folder of their own inside it
    "2023000013": f"2023000013_赵六/{VICTIM}_李四_work (1).ipynb",
    "2023000014": f"2023000014_钱七_{VICTIM}_李四_work.ipynb",  # flat: the part after the LMS's prefix
}


def test_a_file_claiming_a_classmate_stays_with_its_own_student(tmp_path, released):
    root = _lms_course(tmp_path)
    honest = nbformat.writes(released["work.ipynb"])
    own = f"{VICTIM}_李四/work.ipynb"
    first = _collect(root, _zip(tmp_path / "first.zip", [(own, honest)]))
    assert [t[0] for t in first.taken] == [VICTIM]
    forged = {sid: honest.replace("x = 1", f"x = {sid}") for sid in CLAIMS}
    result = _collect(root, _zip(tmp_path / "lms.zip", [(own, honest)] + [(name, forged[sid], LATER)
                                                                         for sid, name in CLAIMS.items()]))
    assert _submitted(root, VICTIM) == honest
    assert not (root / "submitted_earlier").exists()
    assert sorted(t[0] for t in result.taken) == sorted(CLAIMS)  # the victim's is unchanged and kept
    for sid in CLAIMS:
        assert _submitted(root, sid) == forged[sid]  # the attacker's own upload, graded as theirs
        assert any(f"自称属于 {VICTIM}" in n and n.startswith(sid) for n in result.notes), (sid, result.notes)


HOSTILE_NAMES = [
    "../2023000009_赵九_work.ipynb",
    "2023000001_张三/../../2023000009_赵九_work.ipynb",
    "/2023000009_赵九_work.ipynb",
    "C:\\2023000009_赵九_work.ipynb",
    "\\\\server\\2023000009_赵九_work.ipynb",
    "2023000009_赵\x1b[2J九_work.ipynb",
    "2023000009_赵九\u202e_krow.ipynb",
    "2023000009_赵九_" + "长" * 100 + "_work.ipynb",
]


def test_no_student_is_made_from_a_name_no_lms_writes(tmp_path, released):
    root = _lms_course(tmp_path)
    nb = nbformat.writes(released["work.ipynb"])
    result = _collect(root, _zip(tmp_path / "lms.zip", [(n, nb) for n in HOSTILE_NAMES]
                                 + [("2023000004_赵六_work.ipynb", nb)]))
    # the LMS's prefix of the last name is plain: only the student's own part is too long; taken in, with a note
    assert [t[0] for t in result.taken] == ["2023000004", "2023000009"]
    assert sorted(p.name for p in (root / "submitted").iterdir()) == ["2023000004", "2023000009"]
    assert any(n.startswith("2023000009：") and "超过 255 字节" in n for n in result.notes), result.notes
    assert len(result.unmatched) == len(HOSTILE_NAMES) - 1 and all("LMS" in why for _, why in result.unmatched)
    shown = "".join(name for name, _ in result.unmatched) + "".join(result.notes)
    assert "\x1b" not in shown and "\u202e" not in shown and max(len(n) for n, _ in result.unmatched) < 200
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == ["2023000004", "2023000009"]


def test_honest_names_inside_the_lms_folder_are_collected_without_a_note(tmp_path, released):
    root = _lms_course(tmp_path)
    nb = nbformat.writes(released["work.ipynb"])
    result = _collect(root, _zip(tmp_path / "lms.zip", [
        ("2023000004_赵六/2023000004_赵六_work.ipynb", nb),  # a student who names the file as told
        ("2023000005_王五/作业/work.ipynb", nb),  # a folder of their own
        ("2023000006_钱七_work.ipynb", nb)]))
    assert sorted(t[0] for t in result.taken) == ["2023000004", "2023000005", "2023000006"]
    assert result.unmatched == [] and result.notes == []


def test_a_teachers_rezip_is_looked_through_but_a_folder_claiming_several_students_is_not(tmp_path, released):
    root = _lms_course(tmp_path)
    nb = nbformat.writes(released["work.ipynb"])
    wrapped = _collect(root, _zip(tmp_path / "rezip.zip", [("下载/2023000004_赵六_work.ipynb", nb),
                                                          ("下载/2023000005_王五/work.ipynb", nb)]))
    assert sorted(t[0] for t in wrapped.taken) == ["2023000004", "2023000005"] and wrapped.unmatched == []
    claims = _collect(root, _zip(tmp_path / "one.zip", [("2023000001_张三/2023000007_甲_work.ipynb", nb),
                                                      ("2023000001_张三/2023000008_乙_work.ipynb", nb)]))
    assert claims.taken == [] and len(claims.unmatched) == 2 and "好几名不同的学生" in claims.unmatched[0][1]
    assert not (root / "submitted" / "2023000007").exists() and not (root / "submitted" / "2023000008").exists()
    unknown = _collect(root, _zip(tmp_path / "moodle.zip", [("张三_123_assignsubmission_file_/2023000007_甲_work.ipynb",
                                                             nb), ("2023000006_钱七_work.ipynb", nb)]))
    assert [t[0] for t in unknown.taken] == ["2023000006"] and "不是 LMS 的学生文件夹名" in unknown.unmatched[0][1]
    alone = _collect(root, _zip(tmp_path / "alone.zip", [  # one Moodle student's make-up zip is not looked through
        ("张三_123_assignsubmission_file_/2023000007_甲_work.ipynb", nb)]))
    assert alone.taken == [] and "不是 LMS 的学生文件夹名" in alone.unmatched[0][1]


# --- a download with several assignments' notebooks ----------------------------------------------------------------

def test_each_notebook_goes_only_to_its_own_assignment(tmp_path, released):
    root = _lms_course(tmp_path)
    mine = nbformat.writes(released["work.ipynb"])
    theirs = mine.replace("x = 1", "other = 2")
    result = _collect(root, _zip(tmp_path / "lms.zip", [
        ("2023000001_张三_work.ipynb", mine), ("2023000001_张三_other.ipynb", theirs, LATER),  # both handed in
        ("2023000002_李四_other.ipynb", theirs),  # only the other assignment
        ("2023000003_王五_other_最终版 (1).ipynb", theirs), ("2023000003_王五_作业.ipynb", mine),
        ("2023000004_赵六/other.ipynb", theirs)]), others={"other.ipynb": "b"})
    assert sorted(t[0] for t in result.taken) == ["2023000001", "2023000003"]
    assert _submitted(root, "2023000001") == mine and _submitted(root, "2023000003") == mine
    assert not (root / "submitted" / "2023000002").exists() and not (root / "submitted" / "2023000004").exists()
    assert len(result.unmatched) == 4 and all("是作业 b 的 other.ipynb" in why for _, why in result.unmatched)
    assert not any("交了" in n for n in result.notes), result.notes


# --- names decoded per archive ---------------------------------------------------------------------------------

def test_one_encoding_decision_per_archive(tmp_path):
    import zipfile
    zheng = "2023000001_郑一_work.ipynb".encode("gbk")
    assert zheng.decode("utf-8") != "2023000001_郑一_work.ipynb"  # GBK bytes that are valid UTF-8
    entries = [(zheng, "{}", (2026, 1, 1, 0, 0, 0), False, b""),
               ("2023000002_张三_work.ipynb".encode("gbk"), "{}", (2026, 1, 1, 0, 0, 0), False, b""),
               ("2023000003_李四_work.ipynb".encode(), "{}", (2026, 1, 1, 0, 0, 0), True, b"")]  # marked UTF-8
    with zipfile.ZipFile(raw_zip(tmp_path / "mixed.zip", entries)) as z:
        assert lms.archive_names(z.infolist()) == ["2023000001_郑一_work.ipynb", "2023000002_张三_work.ipynb",
                                                   "2023000003_李四_work.ipynb"]
    with zipfile.ZipFile(raw_zip(tmp_path / "alone.zip", entries[:1])) as z:  # nothing in it says GBK: UTF-8
        assert lms.archive_names(z.infolist(), "gb18030") == [zheng.decode("utf-8")]


def test_a_unicode_path_field_counts_only_when_its_crc_matches_the_name(tmp_path):
    import zipfile
    raw = "2023000002_张三_work.ipynb".encode("gbk")
    good = unicode_path_extra(raw, "2023000002_张三_work.ipynb")
    stale = unicode_path_extra("2023000009_王九_work.ipynb".encode("gbk"), "2023000009_王九_work.ipynb")
    for extra, name in [(good, "2023000002_张三_work.ipynb"), (stale, "2023000002_张三_work.ipynb")]:
        path = raw_zip(tmp_path / "u.zip", [(raw, "{}", (2026, 1, 1, 0, 0, 0), False, extra)])
        with zipfile.ZipFile(path) as z:
            assert lms.archive_names(z.infolist()) == [name]


# --- bounded and readable ---------------------------------------------------------------------------------------

def test_a_download_expands_to_at_most_its_limit_counted_while_copying(tmp_path):
    import struct
    import zipfile
    plugin = lms.LMSFileNames(max_download_mb=1)
    path = tmp_path / "big.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for k in range(4):
            z.writestr(f"2023000001_张三/{k}.ipynb", b"0" * 400_000)
    into = tmp_path / "out"
    uploads, skipped = lms.unpack(path, into, plugin)
    written = sum(p.stat().st_size for p in into.rglob("*") if p.is_file())
    assert len(uploads) == 2 and written <= 1 << 20 and len(skipped) == 2
    assert all("max_download_mb" in why for _, why in skipped)
    blob = bytearray(path.read_bytes())  # a header that says the file is small: what comes out is counted
    central = blob.find(b"PK\x01\x02")
    struct.pack_into("<I", blob, central + 24, 10)
    path.write_bytes(bytes(blob))
    uploads, skipped = lms.unpack(path, tmp_path / "out2", plugin)
    assert len(uploads) == 2 and skipped[0][0] == "2023000001_张三/0.ipynb" and "损坏" in skipped[0][1]


def test_entries_not_collected_are_grouped_and_links_are_listed(tmp_path, released, capsys):
    import zipfile

    from attncourse.grading import commands
    root = _lms_course(tmp_path)
    (root / "release" / "a").mkdir(parents=True)
    (root / "release" / "a" / "work.ipynb").write_text(nbformat.writes(released["work.ipynb"]), encoding="utf-8")
    (root / "released.json").write_text(json.dumps({"a": {}}), encoding="utf-8")
    path = tmp_path / "junk.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("2023000001_张三_work.ipynb", nbformat.writes(released["work.ipynb"]))
        for k in range(20_000):
            z.writestr(f"junk/{k}.txt", "")
        link = zipfile.ZipInfo("2023000002_李四_work.ipynb")
        link.create_system, link.external_attr = 3, (0o120777 << 16)
        z.writestr(link, "/etc/passwd")
    result = commands.collect_download(root, path, "a")
    out = capsys.readouterr().out
    assert [t[0] for t in result.taken] == ["2023000001"] and len(result.unmatched) == 20_001
    assert len(out.splitlines()) < 10 and "未收集 20000 个：不是 notebook" in out and "符号链接" in out, out
    listing = (root / "build" / "collect-a-未收集.txt").read_text(encoding="utf-8").splitlines()
    assert len([line for line in listing if not line.startswith("#")]) == 20_001


# --- each LMS's own layout, with a roster that maps its ids to student numbers and names ---------------------------

def _configure(root, preset, roster_text):
    (root / "roster.csv").write_text(roster_text, encoding="utf-8")
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.LMSFileNames.preset = {preset!r}\nc.LMSFileNames.roster = 'roster.csv'\n")


def _students(root):
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.id: f"{s.last_name}{s.first_name}" for s in gb.students}


def test_a_canvas_download_with_late_and_resubmitted_files(tmp_path, released):
    """Canvas: flat, `<sortable name>_[LATE_]<user id>_<attachment id>_<the student's file>`, a re-submission
    adding "-1"; the roster is nbgrader's import format plus `lms_id`."""
    root = _lms_course(tmp_path)
    _configure(root, "canvas", "id,first_name,last_name,email,lms_id\n2023000001,三,张,,51234\n"
                             "2023000002,四,李,li@example.edu,51235\n2023000003,娜娜,欧阳,,51236\n")
    nb = nbformat.writes(released["work.ipynb"])
    blank = nb.replace("x = 1", "x = 0")
    result = _collect(root, _zip(tmp_path / "canvas.zip", [
        ("zhangsan_51234_900001_work.ipynb", blank), ("zhangsan_51234_900002_work-1.ipynb", nb, LATER),
        ("lisi_LATE_51235_900003_作业1.ipynb", nb),
        ("ouyangnana_51236_900004_zhangsan_51234_900009_work.ipynb", blank, LATER),  # claims a classmate
        ("wangwu_59999_900005_work.ipynb", nb)]))  # not in the roster
    assert sorted(t[0] for t in result.taken) == ["2023000001", "2023000002", "2023000003"]
    assert _submitted(root, "2023000001") == nb and _submitted(root, "2023000002") == nb
    assert _students(root) == {"2023000001": "张三", "2023000002": "李四", "2023000003": "欧阳娜娜"}
    assert result.unmatched == [("wangwu_59999_900005_work.ipynb", roster.NOT_IN_ROSTER)]
    assert any(n.startswith("51236") and "自称属于 51234" in n for n in result.notes), result.notes


def test_a_blackboard_download_with_attempts_and_their_receipts(tmp_path, released):
    """Blackboard Learn: flat, `<assignment>_<user name>_attempt_<yyyy-mm-dd-hh-mm-ss>_<the student's file>`, and
    a receipt `<assignment>_<user name>_attempt_<time>.txt` per attempt; the later attempt is kept whatever the
    zip's own dates say."""
    root = _lms_course(tmp_path)
    _configure(root, "blackboard", "学号,姓名,LMS id\n2023000001,张三,2023000001\n2023000002,李四,2023000002\n")
    nb = nbformat.writes(released["work.ipynb"])
    blank = nb.replace("x = 1", "x = 0")
    receipt = "Name: 张三 (2023000001)\nAssignment: 作业 1\nDate Submitted: 2026年10月9日 星期五 20时00分00秒\n"
    result = _collect(root, _zip(tmp_path / "gradebook.zip", [
        ("作业 1_2023000001_attempt_2026-10-09-21-00-00_work.ipynb", nb),
        ("作业 1_2023000001_attempt_2026-10-09-21-00-00.txt", receipt),
        ("作业 1_2023000001_attempt_2026-10-09-20-00-00_work.ipynb", blank, LATER),  # the zip's date is later
        ("作业 1_2023000002_attempt_2026-10-09-20-30-00_2023000001_张三_work.ipynb", blank)]))  # claims a classmate
    assert sorted(t[0] for t in result.taken) == ["2023000001", "2023000002"]
    assert _submitted(root, "2023000001") == nb and _submitted(root, "2023000002") == blank
    assert _students(root) == {"2023000001": "张三", "2023000002": "李四"}
    assert [why for _, why in result.unmatched] == [lms.NOT_NOTEBOOK]  # the receipt
    assert any("交了 2 份" in n and "attempt_2026-10-09-21-00-00_work.ipynb" in n.split("放在一边的")[0]
               for n in result.notes), result.notes


def test_a_moodle_download_with_a_folder_per_submission(tmp_path, released):
    """Moodle: `<full name>_<participant id>_assignsubmission_file_/<the student's files>`, online text in its
    own folder; the roster with Chinese headers."""
    root = _lms_course(tmp_path)
    _configure(root, "moodle", "学号,姓名,LMS id\n2023000001,张三,812\n2023000002,李四,813\n")
    nb = nbformat.writes(released["work.ipynb"])
    result = _collect(root, _zip(tmp_path / "moodle.zip", [
        ("Zhang San_812_assignsubmission_file_/work.ipynb", nb),
        ("李四_813_assignsubmission_file_/作业/2023000001_张三_work.ipynb", nb),  # a folder and a name of their own
        ("李四_813_assignsubmission_onlinetext_/onlinetext.html", "<p>见附件</p>")]))
    assert sorted(t[0] for t in result.taken) == ["2023000001", "2023000002"]
    assert _students(root) == {"2023000001": "张三", "2023000002": "李四"}
    assert [why for _, why in result.unmatched] == [lms.NOT_NOTEBOOK]


# --- every student the download names gets one outcome, whatever they uploaded ----------------------------------

def test_what_a_student_uploaded_is_taken_in_or_recorded_as_not_collected(tmp_path, released):
    """Moodle: a zip holding one notebook is taken in with a note; a PDF, an empty zip or one with two notebooks
    is recorded as not collected for the student the folder names; a notebook whose name no file system holds
    is taken under a safe name; every roster student is in the gradebook. Canvas: the same for a flat download."""
    from attncourse.grading.model import Status
    from attncourse.grading.records import read_record
    root = _lms_course(tmp_path)
    _configure(root, "moodle", "学号,姓名,LMS id\n" + "".join(f"202300000{i},学生{i},81{i}\n" for i in range(1, 8)))
    nb = nbformat.writes(released["work.ipynb"])
    result = _collect(root, _zip(tmp_path / "moodle.zip", [
        ("学生1_811_assignsubmission_file_/作业.zip", zip_bytes([("作业/work.ipynb", nb), ("__MACOSX/._work.ipynb", "x")])),
        ("学生2_812_assignsubmission_file_/报告.pdf", b"%PDF-1.4"),
        ("学生3_813_assignsubmission_file_/空.zip", zip_bytes([("readme.txt", "hi")])),
        ("学生4_814_assignsubmission_file_/两份.zip", zip_bytes([("a/work.ipynb", nb), ("b/work (1).ipynb", nb)])),
        ("学生5_815_assignsubmission_file_/" + "很长" * 60 + "\x07work.ipynb", nb),
        ("学生6_816_assignsubmission_file_/作业4.ipynb", nb)]))  # renamed: graded under the released name
    assert sorted(t[0] for t in result.taken) == ["2023000001", "2023000005", "2023000006"]
    assert _submitted(root, "2023000001") == nb and _submitted(root, "2023000005") == nb
    assert sorted(result.refused) == ["2023000002", "2023000003", "2023000004"]
    for sid, words in (("2023000002", "报告.pdf（不是 notebook）"), ("2023000003", "没有本作业的 notebook"),
                       ("2023000004", "有 2 个本作业的 notebook")):
        record = read_record(root, "a", sid)
        assert record.status == Status.NOT_COLLECTED and words in record.reason, (sid, record)
    notes = "\n".join(result.notes)
    assert "2023000001：从上传的压缩包 作业.zip 中取出 work.ipynb 评分" in notes
    assert "2023000005：上传的文件名含控制字符或超过 255 字节" in notes and "\x07" not in notes
    assert "2023000006：上传的文件名是" in notes and "作业4.ipynb，按作业的 work.ipynb 评分" in notes
    from attncourse.grading.intake.staging import intake_notes
    assert any("作业4.ipynb" in n for n in intake_notes(root, "a", "2023000006"))  # reaches the grade's notes
    assert set(_students(root)) == {f"202300000{i}" for i in range(1, 8)}  # 2023000007 uploaded nothing
    # a later download with a notebook: the student is collected, the "not collected" record goes
    again = _collect(root, _zip(tmp_path / "moodle2.zip", [("学生2_812_assignsubmission_file_/work.ipynb", nb, LATER)]))
    assert [t[0] for t in again.taken] == ["2023000002"] and read_record(root, "a", "2023000002") is None


def test_a_flat_canvas_download_with_a_zip_and_a_document(tmp_path, released):
    from attncourse.grading.records import read_record
    root = _lms_course(tmp_path)
    _configure(root, "canvas", "id,first_name,last_name,email,lms_id\n2023000001,三,张,,51234\n"
                               "2023000002,四,李,,51235\n")
    nb = nbformat.writes(released["work.ipynb"])
    result = _collect(root, _zip(tmp_path / "canvas.zip", [
        ("zhangsan_51234_900001_作业.zip", zip_bytes([("work.ipynb", nb)])),
        ("lisi_51235_900002_实验报告.docx", b"PK-not-really")]))
    assert [t[0] for t in result.taken] == ["2023000001"] and _submitted(root, "2023000001") == nb
    assert result.refused == {"2023000002": "上传的是 实验报告.docx（不是 notebook）"}
    assert "实验报告.docx" in read_record(root, "a", "2023000002").reason


@pytest.mark.parametrize("make, words", [
    (lambda p: p, "找不到"),
    (lambda p: (p.write_text("学号,成绩\n", encoding="utf-8"), p)[1], "不是 zip 文件"),
    (lambda p: (p.write_bytes(b"Rar!\x1a\x07\x00" + b"\0" * 100), p)[1], "RAR 压缩包"),
    (lambda p: (p.write_bytes(zip_bytes([("a_b_work.ipynb", "{}" * 5000)])[:3000]), p)[1], "不完整或已损坏的 zip"),
])
def test_a_download_that_cannot_be_read_gets_its_own_message(tmp_path, released, make, words):
    root = _lms_course(tmp_path)
    with pytest.raises((FileNotFoundError, ValueError), match=words):
        _collect(root, make(tmp_path / "download.zip"))


def test_an_unknown_assignment_lists_the_released_ones_and_the_nearest(tmp_path, released):
    from attncourse.grading import commands
    root = _lms_course(tmp_path)
    (root / "released.json").write_text(json.dumps({"a1_scoring": {}, "a2_multihead": {}}), encoding="utf-8")
    (root / "source" / "a3_gqa").mkdir(parents=True)
    (root / "source" / "a3_gqa" / "gqa.ipynb").write_text("{}", encoding="utf-8")
    with pytest.raises(commands.ToolchainError) as typo:
        commands.released_ids(root, ["a1_scorng"])
    assert "a1_scoring、a2_multihead" in str(typo.value) and "是不是 a1_scoring" in str(typo.value)
    with pytest.raises(commands.ToolchainError, match="a3_gqa 尚未发布：先运行 course release a3_gqa"):
        commands.released_ids(root, ["a3_gqa"])
