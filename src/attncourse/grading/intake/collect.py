"""Collecting submissions: an LMS download (a zip file or a folder of files) into `submitted/<student>/<A>/`.

A student's latest upload is the one graded, whatever its name; uploads at the same time (LMSs often keep times
to the minute) go to the LMS's later copy (`x (1).ipynb` after `x.ipynb`). The note says which file was graded and
which were set aside. A student who already has a submission in `submitted/` keeps whichever is later; the
earlier one is moved to `submitted_earlier/`, never overwritten silently. Whose file it is and which assignment's
notebook it is are read as `lms.py` says; files that cannot be placed are listed with why, not guessed, and the
rest of the download is collected. A student the LMS names whose upload holds no notebook to grade (a PDF, a zip
without one notebook) is recorded as not collected, with why (records.not_collected), so that every output has
their row. What collect changed on the way (a renamed notebook, one taken from a zip or under a safe name) is
kept for the grade's notes (`intake_notes`). With a roster, every student on it is in the gradebook.
"""
import datetime
import json
import shutil
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc
from traitlets.config import Config

from .. import records
from ..course import Folders
from ..files import write_atomic
from . import roster
from .lms import LMSFileNames, Upload, read_download
from .staging import TIMESTAMP, intake_notes_path


@dataclass
class Collected:
    """What `collect` did, for the instructor to read."""
    # (student, notebook, time, the file's name in the download)
    taken: list[tuple[str, str, datetime.datetime, str]] = field(default_factory=list)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    notes: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # student the LMS names -> why nothing was taken in
    extra: dict[str, list[str]] = field(default_factory=dict)  # student graded -> files of theirs not taken


def _existing_time(folder: Path) -> datetime.datetime | None:
    try:
        when: datetime.datetime = parse_utc((folder / TIMESTAMP).read_text(encoding="utf-8").strip())
        return when
    except (OSError, ValueError):
        return None


def _utc(path: Path) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC).replace(tzinfo=None)


def _replace_earlier(root: Path, dest: Path, when: datetime.datetime, student: str,
                     assignment: str) -> tuple[str, bool]:
    """Before a later submission takes `dest`'s place, set the earlier one aside in submitted_earlier/.
    Returns (note, replaced): not replaced when the one already collected is as late or later."""
    before = _existing_time(dest)
    if before is None or before >= when:
        earlier = "没有时间记录" if before is None else f"{before:%Y-%m-%d %H:%M:%S}"
        return f"{student}：已收集的提交（{earlier}）不比这次的（{when:%Y-%m-%d %H:%M:%S}）旧，保留已收集的", False
    submitted = Path(dest).parent.parent  # the class folder: the earlier one goes beside it, in <name>_earlier/
    archive = submitted.with_name(f"{submitted.name}_earlier") / student / assignment / f"{before:%Y%m%d-%H%M%S}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(dest), str(archive))
    return (f"{student}：新提交（{when:%Y-%m-%d %H:%M:%S}）替换了之前的（{before:%Y-%m-%d %H:%M:%S}），"
            f"旧的移到了 {archive.relative_to(root)}"), True


def import_class(cfg: Config, root: str | Path, class_dir: Path, assignment_ids: Collection[str]) -> list[str]:
    """Copy a folder laid out as <student>/<assignment>/ into submitted/, with the same rule as `collect`:
    an existing submission is replaced only by a later one (by timestamp.txt, else the folder's time, in UTC).
    Returns notes."""
    root = Path(root)
    notes: list[str] = []
    submitted = Folders(cfg).submitted()
    if not class_dir.is_dir():
        raise FileNotFoundError(f"找不到提交目录 {class_dir}（应为 <学生>/<作业>/*.ipynb 的结构）")
    for folder in sorted(p for p in class_dir.iterdir() if p.is_dir()):
        for assignment in assignment_ids:
            src = folder / assignment
            if not src.is_dir():
                continue
            dest = submitted / folder.name / assignment
            if dest.exists():
                note, replaced = _replace_earlier(root, dest, _existing_time(src) or _utc(src), folder.name,
                                                  assignment)
                notes.append(note)
                if not replaced:
                    continue
            shutil.copytree(src, dest, symlinks=True)  # links stay links: intake refuses them
    return notes


def grouped(unmatched: list[tuple[str, str]], examples: int = 3) -> list[tuple[str, int, list[str]]]:
    """[(why, count, the first few names)] of the entries not collected, the largest group first."""
    groups: dict[str, list[str]] = {}
    for name, why in unmatched:
        groups.setdefault(why, []).append(name)
    return [(why, len(names), names[:examples]) for why, names in sorted(groups.items(), key=lambda g: -len(g[1]))]


def write_listing(path: Path, unmatched: list[tuple[str, str]]) -> None:
    """Every entry not collected, once, under its reason."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for why, count, _ in grouped(unmatched):
        lines += [f"# {why}（{count} 个）"] + [name for name, w in unmatched if w == why]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _taken_notes(upload: Upload) -> list[str]:
    """Notes for a submission taken from `upload`: under another name than the released one, from a zip, under a
    safe name."""
    renamed = Path(upload.notebook).stem not in Path(upload.name).stem and not upload.note
    return ([upload.note] if upload.note else []) + (
        [f"上传的文件名是 {upload.shown}，按作业的 {upload.notebook} 评分"] if renamed else [])


def _when(t: datetime.datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S} UTC"


def collect(cfg: Config, root: str | Path, source: str | Path, assignment: str, released: list[str],
            others: dict[str, str] | None = None) -> Collected:
    """Collect the download `source` for `assignment` into submitted/; `released` are its notebook names,
    `others` {notebook name: assignment} those of the other assignments."""
    root = Path(root)
    plugin = LMSFileNames(config=cfg)
    result = Collected()
    with tempfile.TemporaryDirectory() as scratch:
        uploads, result.unmatched, result.notes = read_download(Path(source), Path(scratch), plugin, released,
                                                                 others)
        with Gradebook(cfg.CourseDirectory.db_url) as gb:
            if plugin.roster:
                listed = roster.read_roster(root / plugin.roster)
                uploads = roster.apply(uploads, listed, result.unmatched)
                for student, names in dict(listed.values()).items():  # the roster's students: each gets a row
                    gb.update_or_create_student(student, **names)
        refused = [u for u in uploads if u.refused]
        uploads = [u for u in uploads if not u.refused]
        chosen: dict[tuple[str, str], Upload] = {}  # (student, notebook) -> the upload graded
        groups: dict[tuple[str, str], list[Upload]] = {}
        for upload in uploads:
            groups.setdefault((upload.student, upload.notebook), []).append(upload)
        for (student, notebook), group in sorted(groups.items()):
            group.sort(key=lambda u: (u.when, u.copy_number, u.name))
            chosen[(student, notebook)] = group[-1]
            if len(group) > 1:
                aside = "、".join(f"{u.shown}（{_when(u.when)}）" for u in group[:-1])
                result.notes.append(f"{student} 交了 {len(group)} 份 {notebook}：评分用最新的 {group[-1].shown}"
                                    f"（{_when(group[-1].when)}），放在一边的：{aside}")
        by_student: dict[str, list[Upload]] = {}
        for (student, _), upload in chosen.items():
            by_student.setdefault(student, []).append(upload)
        submitted = Folders(cfg).submitted()
        for student, group in sorted(by_student.items()):
            when = max(u.when for u in group)
            dest = submitted / student / assignment
            if dest.exists():
                note, replaced = _replace_earlier(root, dest, when, student, assignment)
                result.notes.append(note)
                if not replaced:
                    continue
            dest.mkdir(parents=True)
            for upload in group:
                assert upload.path is not None  # a notebook, unpacked (lms.read_download)
                shutil.copyfile(upload.path, dest / upload.notebook)
                result.taken.append((student, upload.notebook, upload.when, upload.shown))
            (dest / TIMESTAMP).write_text(f"{when:%Y-%m-%d %H:%M:%S.%f} UTC", encoding="utf-8")
            noted = [n for u in group for n in _taken_notes(u)]
            result.notes += [f"{student}：{n}" for n in noted]
            write_atomic(intake_notes_path(root, assignment, student), json.dumps(noted, ensure_ascii=False))
            records.forget_not_collected(root, assignment, student)
        _refused(root, assignment, refused, by_student, submitted, result)
        with Gradebook(cfg.CourseDirectory.db_url) as gb:
            for student, group in [*by_student.items(), *_by_student(refused).items()]:
                names = {k: v for u in group for k, v in u.names.items()}
                gb.update_or_create_student(student, **names)
    return result


def _by_student(uploads: list[Upload]) -> dict[str, list[Upload]]:
    found: dict[str, list[Upload]] = {}
    for upload in uploads:
        found.setdefault(upload.student, []).append(upload)
    return found


def _refused(root: Path, assignment: str, refused: list[Upload], taken: dict[str, list[Upload]], submitted: Path,
             result: Collected) -> None:
    """The uploads of students the LMS names that hold nothing to grade: a student with a notebook taken (now or
    before) keeps it, the rest are listed for them; a student with nothing is recorded as not collected."""
    for student, group in sorted(_by_student(refused).items()):
        why = "；".join(dict.fromkeys(u.refused for u in group))
        result.unmatched += [(u.shown, u.refused) for u in group]
        if student in taken or (submitted / student / assignment).is_dir():
            result.extra[student] = [u.shown for u in group]
            if student not in taken:
                result.notes.append(f"{student}：这次上传的无法评分（{why}），仍用之前收集的提交")
            continue
        result.refused[student] = why
        records.not_collected(root, assignment, student, why, [f"LMS 下载中的文件：{'、'.join(u.shown for u in group)}"])
