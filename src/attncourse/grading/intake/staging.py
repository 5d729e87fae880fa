"""Taking in a class folder: every submission is copied into a staging folder that only the grader writes.

Only what grading needs is copied: the assignment's notebooks (read with the editors' quirks repaired, the
nbgrader metadata of the student version put back or found again, test cells where the release has them) and
`timestamp.txt`. A submission that cannot be taken in gets a specific reason, never a silent zero; what was set
aside, renamed or repaired is noted.
"""
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.utils import parse_utc
from traitlets.config import Config

from ...notebooks import dumps
from ..cells import grade_id
from ..course import Folders, grading_dir
from . import matching, reading

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TIMESTAMP = "timestamp.txt"


@dataclass
class Intake:
    assignment: str
    student: str
    folder: Path | None = None  # the staged copy, when the submission can be graded
    reason: str = ""  # why it cannot be graded
    notes: list[str] = field(default_factory=list)  # what was set aside or changed, for the CSV and report
    digest: str = ""  # of what was staged: an unchanged submission keeps its grade
    submitted_at: str = "提交时间未知"  # when it was handed in, as timestamp.txt says


def intake_notes_path(root: str | Path, assignment: str, student: str) -> Path:
    return grading_dir(root) / "collected" / assignment / f"{student}.json"


def intake_notes(root: str | Path, assignment: str, student: str) -> list[str]:
    """What the last collect that took this student's submission changed on the way (collect.py writes it)."""
    try:
        notes = json.loads(intake_notes_path(root, assignment, student).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(n) for n in notes] if isinstance(notes, list) else []


def student_id_problem(name: str) -> str:
    if SAFE_ID.match(name):
        return ""
    return (f"学生编号 {name!r} 含不允许的字符：只能用英文字母、数字、'_'、'-'、'.'，且以字母或数字开头"
            "（不超过 64 个字符）")


def _special_files(folder: Path) -> list[str]:
    """Paths below `folder` that are symlinks or not regular files/folders (without following links)."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(str(path.relative_to(folder)))
    return found


def stage(submitted: Path, staged: Path, assignment: str, released: dict[str, NotebookNode]) -> Intake:
    """Copy one student's submission for `assignment` into `staged`; returns an Intake.

    `released`: {notebook file name: the student version}.
    """
    intake = Intake(assignment, submitted.parent.name)
    problem = student_id_problem(intake.student)
    if problem:
        intake.reason = problem
        return intake
    if submitted.is_symlink() or submitted.parent.is_symlink() or not submitted.is_dir():
        intake.reason = "提交目录是符号链接或不是普通目录，拒绝评分"
        return intake
    special = _special_files(submitted)
    if special:
        intake.reason = f"提交中含符号链接或特殊文件（{'、'.join(special[:3])}），拒绝评分"
        return intake
    present = sorted(p for p in submitted.glob("*.ipynb"))
    chosen = {}
    for name in released:
        if (submitted / name) in present:
            chosen[name] = submitted / name
    others = [p for p in present if p.name not in released]
    missing = [name for name in released if name not in chosen]
    if missing and len(missing) == 1:
        readable = [p for p in others if reading.read(p)[0] is not None]
        if len(readable) == 1:
            chosen[missing[0]] = readable[0]
            intake.notes.append(f"没有 {missing[0]}，把 {readable[0].name} 当作它评分")
            missing = []
    if missing:
        given = "、".join(p.name for p in present) or "没有任何 .ipynb 文件"
        intake.reason = f"找不到 {'、'.join(missing)}（提交的是：{given}）"
        return intake
    ignored = [p.name for p in others if p not in chosen.values()]
    if ignored:
        intake.notes.append(f"忽略了多余的 notebook：{'、'.join(ignored)}")
    staged.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    for name, path in sorted(chosen.items()):
        nb, notes = reading.read(path)
        if nb is None:
            intake.reason = f"损坏的 notebook：{notes[0]}"
            return intake
        intake.notes += [f"{name}：{note}" for note in notes]
        if not any(grade_id(c) for c in nb.cells):
            count, missing = matching.match_cells(nb, released[name])
            if missing or not count:
                intake.reason = (f"{name} 没有评分所需的单元格标记（nbgrader 元数据），也无法按内容对应到作业"
                                 f"{'（找不到答案单元格：' + '、'.join(missing) + '）' if missing else ''}："
                                 "请在发下去的作业 notebook 中作答后重新提交")
                return intake
            intake.notes.append(f"{name}：没有评分单元格标记（可能复制到了新 notebook 中），已按内容对应到作业的 "
                                f"{count} 个单元格")
        if matching.restore_metadata(nb, released[name]):
            intake.notes.append(f"{name}：恢复了被改动的评分单元格标记")
        if matching.put_answers_in_order(nb, released[name]):
            matching.put_tests_in_order(nb, released[name])
            intake.notes.append(f"{name}：有几段单元格被拖到了别处，已按发布时的顺序评分（每个答案连同它前面的单元格一起移回）")
        elif matching.put_tests_in_order(nb, released[name]):
            intake.notes.append(f"{name}：测试单元格按发布时的顺序运行（被移动或删除的放回了原处）")
        text = dumps(nb)
        (staged / name).write_text(text, encoding="utf-8")
        digest.update(name.encode() + b"\0" + text.encode())
    stamp = submitted / TIMESTAMP
    if stamp.is_file():
        text = stamp.read_text(encoding="utf-8", errors="replace").strip()[:100]
        try:
            parse_utc(text)
            (staged / TIMESTAMP).write_text(text, encoding="utf-8")
            intake.submitted_at = f"提交于 {text}"
            digest.update(b"timestamp\0" + text.encode())
        except ValueError:
            intake.notes.append(f"{TIMESTAMP} 的内容不是时间，已忽略")
    intake.folder, intake.digest = staged, digest.hexdigest()
    return intake


@contextmanager
def class_staged(cfg: Config, pairs: list[tuple[str, str]]) -> Iterator[list[Intake]]:
    """Every (assignment, student) of the class folder (`c.CourseDirectory.submitted_directory`) staged into a
    scratch folder of the course's build/grading/, removed afterwards; yields their Intakes in order."""
    where = Folders(cfg)
    work = grading_dir(where.root)
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="staged-"))
    released = {a: {p.name: nbformat.read(p, as_version=4) for p in where.released_notebooks(a)}
                for a in sorted({a for a, _ in pairs})}
    try:
        intakes = [stage(where.submitted(s, a), scratch / s / a, a, released[a]) for a, s in pairs]
        for intake in intakes:  # what collect changed on the way, first
            intake.notes[:0] = intake_notes(where.root, intake.assignment, intake.student)
        yield intakes
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
