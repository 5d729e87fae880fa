"""Collecting submissions: an LMS download (a zip file or a folder of files) into `submitted/<student>/<A>/`.

A student's latest upload is the one graded, whatever its name; uploads at the same time (LMSs often keep times
to the minute) go to the LMS's later copy (`x (1).ipynb` after `x.ipynb`). The note says which file was graded and
which were set aside. A student who already has a submission in `submitted/` keeps whichever is later; the
earlier one is moved to `submitted_earlier/`, never overwritten silently. Whose file it is and which assignment's
notebook it is are read as `lms.py` says; files that cannot be placed are listed with why, not guessed, and the
rest of the download is collected.
"""
import datetime
import shutil
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc
from traitlets.config import Config

from ..course import Folders
from . import roster
from .lms import LMSFileNames, Upload, read_download
from .staging import TIMESTAMP


@dataclass
class Collected:
    """What `collect` did, for the instructor to read."""
    # (student, notebook, time, the file's name in the download)
    taken: list[tuple[str, str, datetime.datetime, str]] = field(default_factory=list)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    notes: list[str] = field(default_factory=list)


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
        if plugin.roster:
            uploads = roster.apply(uploads, roster.read_roster(root / plugin.roster), result.unmatched)
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
        with Gradebook(cfg.CourseDirectory.db_url) as gb:
            for student, group in by_student.items():
                names = {k: v for u in group for k, v in u.names.items()}
                gb.update_or_create_student(student, **names)
    return result
