"""The class roster: the ids an LMS writes in its download mapped to student numbers and real names.

A CSV in nbgrader's `nbgrader db student import` format (`id,first_name,last_name,email`; nbgrader ignores other
columns) with one more column, `lms_id`: the id the LMS writes (Moodle's participant id, Canvas's user id). The
Chinese headers `学号,姓名,LMS id` are read as `id`, the full name (split into surname and given name) and `lms_id`.
A row without `lms_id` maps the student number to itself. With a roster, a download's id that is not in it makes
no student: the file is listed.
"""
import csv
from pathlib import Path

from .lms import Upload, split_name
from .staging import student_id_problem

ALIASES = {"学号": "id", "姓名": "full_name", "lms id": "lms_id", "lms_id": "lms_id"}
NOT_IN_ROSTER = "LMS 写的学生编号不在名单（c.LMSFileNames.roster）中，不据此新建学生"
Roster = dict[str, tuple[str, dict[str, str]]]  # LMS id or student number -> (student number, names)


def read_roster(path: str | Path) -> Roster:
    """{LMS id or student number: (student number, {"last_name", "first_name"})}; ValueError says what is wrong."""
    path = Path(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        reader.fieldnames = [ALIASES.get(k.strip().lower(), ALIASES.get(k.strip(), k.strip()))
                             for k in reader.fieldnames or []]
        if "id" not in reader.fieldnames:
            raise ValueError(f"名单 {path.name} 没有 id（学号）列：应为 id,first_name,last_name,email,lms_id "
                             "或 学号,姓名,LMS id")
        roster: Roster = {}
        for line, row in enumerate(reader, start=2):
            sid = (row.get("id") or "").strip()
            problem = student_id_problem(sid)
            if problem:
                raise ValueError(f"名单 {path.name} 第 {line} 行：{problem}")
            names = {k: row[k].strip() for k in ("first_name", "last_name") if (row.get(k) or "").strip()}
            if (row.get("full_name") or "").strip():
                names["last_name"], names["first_name"] = split_name(row["full_name"])
            for key in {sid, (row.get("lms_id") or "").strip()} - {""}:
                if key in roster and roster[key][0] != sid:
                    raise ValueError(f"名单 {path.name} 第 {line} 行：{key} 已属于 {roster[key][0]}")
                roster[key] = (sid, names)
    return roster


def apply(uploads: list[Upload], roster: Roster, unmatched: list[tuple[str, str]]) -> list[Upload]:
    """The uploads whose LMS id is in the roster, under the student number and names it gives; the others are
    added to `unmatched`."""
    kept = []
    for upload in uploads:
        if upload.student not in roster:
            unmatched.append((upload.shown, NOT_IN_ROSTER))
            continue
        upload.student, names = roster[upload.student]
        upload.names = names or upload.names
        kept.append(upload)
    return kept
