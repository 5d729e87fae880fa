"""Collecting submissions: an LMS download (a zip file or a folder of files) into `submitted/<student>/<A>/`.

File names are read by nbgrader's ZipCollect collector plugin (`FileNameCollectorPlugin`) with the course's
pattern, `c.FileNameCollectorPlugin.named_regexp` in nbgrader_config.py, applied to each file's name. The
pattern must give `student_id` and `file_id`, and may give `full_name` (or `first_name`/`last_name`) and a
`timestamp`; without one, a file's time is its modification time (in a zip: the time stored in the zip).

A student who appears twice keeps the latest file. A student who already has a submission in `submitted/`
keeps whichever is later; the earlier one is moved to `submitted_earlier/`, never overwritten silently.
Files that match no pattern are reported, not guessed.
"""
import datetime
import os
import re
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from nbgrader.utils import parse_utc

from .staging import MAX_NOTEBOOK_BYTES, TIMESTAMP, student_id_problem

DUPLICATE_SUFFIX = re.compile(r"\s*[\(（]\d+[\)）]$")  # "scoring (1)", as LMSs and browsers name a second copy
COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "尉迟", "公孙", "慕容", "令狐", "长孙", "宇文",
                     "司徒", "夏侯", "轩辕", "端木", "独孤", "南宫", "西门", "万俟", "闻人", "赫连", "澹台", "公冶")
MAX_ZIP_BYTES = 2 << 30


class LMSFileNames(FileNameCollectorPlugin):
    """nbgrader's collector, applied to the file's own name (not its whole path)."""

    def collect(self, submitted_file):
        return super().collect(Path(submitted_file).name)


@dataclass
class File:
    path: Path
    student: str
    notebook: str
    when: datetime.datetime
    names: dict = field(default_factory=dict)


@dataclass
class Collected:
    """What `collect` did, for the instructor to read."""
    taken: list = field(default_factory=list)  # (student, notebook, time)
    unmatched: list = field(default_factory=list)  # (file, why)
    notes: list = field(default_factory=list)


def split_name(full):
    """(last_name, first_name) of a Chinese name: the surname first, as formgrader shows "last, first"."""
    full = full.strip()
    if not full or not re.match(r"^[\u4e00-\u9fff·]+$", full):
        return full, ""
    surname = 2 if full.startswith(COMPOUND_SURNAMES) and len(full) > 2 else 1
    return full[:surname], full[surname:]


def extract(archive, into):
    """Unzip `archive` into `into`, flat and safely: no paths, links or oversized files; file times kept."""
    total = 0
    with zipfile.ZipFile(archive) as z:
        for i, info in enumerate(z.infolist()):
            mode = info.external_attr >> 16
            if info.is_dir() or stat.S_ISLNK(mode):
                continue
            total += info.file_size
            if info.file_size > MAX_NOTEBOOK_BYTES or total > MAX_ZIP_BYTES:
                raise ValueError(f"{archive.name} 中的 {info.filename} 过大，已停止解压")
            name = Path(info.filename.replace("\\", "/")).name
            target = into / f"{i:05d}" / name
            target.parent.mkdir(parents=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            when = datetime.datetime(*info.date_time).timestamp()
            os.utime(target, (when, when))


def _candidates(source, scratch):
    """All files of a download: the zip's contents, or the folder's files (nested folders included)."""
    source = Path(source)
    if source.is_file() and zipfile.is_zipfile(source):
        extract(source, scratch)
        return sorted(p for p in scratch.rglob("*") if p.is_file())
    if source.is_dir():
        return sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink())
    raise FileNotFoundError(f"{source} 不是 zip 文件或文件夹")


def parse(files, plugin, released):
    """([File], unmatched [(file, why)]) from the download's files, names read by `plugin`."""
    found, unmatched = [], []
    for path in files:
        info = plugin.collect(str(path))
        if not info:
            unmatched.append((path.name, "文件名不符合 c.FileNameCollectorPlugin.named_regexp"
                              if path.suffix == ".ipynb" else "不是 notebook"))
            continue
        problem = student_id_problem(info["student_id"])
        if problem:
            unmatched.append((path.name, problem))
            continue
        stem = DUPLICATE_SUFFIX.sub("", Path(info["file_id"]).stem)
        notebook = f"{stem}.ipynb" if f"{stem}.ipynb" in released else Path(info["file_id"]).name
        try:
            when = parse_utc(info["timestamp"]) if info.get("timestamp") else None
        except ValueError:
            when = None
        if when is None:
            when = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc).replace(tzinfo=None)
        names = {k: info[k] for k in ("first_name", "last_name") if info.get(k)}
        if info.get("full_name"):
            names["last_name"], names["first_name"] = split_name(info["full_name"])
        found.append(File(path, info["student_id"], notebook, when, names))
    return found, unmatched


def _existing_time(folder):
    try:
        return parse_utc((folder / TIMESTAMP).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _replace_earlier(root, dest, when, student, assignment):
    """Before a later submission takes `dest`'s place, set the earlier one aside in submitted_earlier/.
    Returns (note, replaced): not replaced when the one already collected is as late or later."""
    before = _existing_time(dest)
    if before is None or before >= when:
        earlier = "没有时间记录" if before is None else f"{before:%Y-%m-%d %H:%M:%S}"
        return f"{student}：已收集的提交（{earlier}）不比这次的（{when:%Y-%m-%d %H:%M:%S}）旧，保留已收集的", False
    archive = Path(root) / "submitted_earlier" / student / assignment / f"{before:%Y%m%d-%H%M%S}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(dest), str(archive))
    return (f"{student}：新提交（{when:%Y-%m-%d %H:%M:%S}）替换了之前的（{before:%Y-%m-%d %H:%M:%S}），"
            f"旧的移到了 {archive.relative_to(root)}"), True


def import_class(cfg, root, class_dir, assignment_ids):
    """Copy a folder laid out as <student>/<assignment>/ into submitted/, with the same rule as `collect`:
    an existing submission is replaced only by a later one (by timestamp.txt). Returns notes."""
    root, notes = Path(root), []
    submitted = root / cfg.CourseDirectory.submitted_directory
    if not class_dir.is_dir():
        raise FileNotFoundError(f"找不到提交目录 {class_dir}（应为 <学生>/<作业>/*.ipynb 的结构）")
    for folder in sorted(p for p in class_dir.iterdir() if p.is_dir()):
        for assignment in assignment_ids:
            src = folder / assignment
            if not src.is_dir():
                continue
            dest = submitted / folder.name / assignment
            if dest.exists():
                when = _existing_time(src) or datetime.datetime.fromtimestamp(src.stat().st_mtime)
                note, replaced = _replace_earlier(root, dest, when, folder.name, assignment)
                notes.append(note)
                if not replaced:
                    continue
            shutil.copytree(src, dest, symlinks=True)  # links stay links: intake refuses them
    return notes


def collect(cfg, root, source, assignment, released):
    """Collect the download `source` for `assignment` into submitted/; `released` are its notebook names."""
    root = Path(root)
    plugin = LMSFileNames(config=cfg)
    result = Collected()
    with tempfile.TemporaryDirectory() as scratch:
        files, result.unmatched = parse(_candidates(source, Path(scratch)), plugin, released)
        latest = {}
        for f in sorted(files, key=lambda f: f.when):
            key = (f.student, f.notebook)
            if key in latest:
                result.notes.append(f"{f.student} 在下载中交了不止一份 {f.notebook}，保留最新的（{f.when:%Y-%m-%d %H:%M:%S}）")
            latest[key] = f
        by_student = {}
        for f in latest.values():
            by_student.setdefault(f.student, []).append(f)
        submitted = root / cfg.CourseDirectory.submitted_directory
        for student, group in sorted(by_student.items()):
            when = max(f.when for f in group)
            dest = submitted / student / assignment
            if dest.exists():
                note, replaced = _replace_earlier(root, dest, when, student, assignment)
                result.notes.append(note)
                if not replaced:
                    continue
            dest.mkdir(parents=True)
            for f in group:
                shutil.copyfile(f.path, dest / f.notebook)
                result.taken.append((student, f.notebook, f.when))
            (dest / TIMESTAMP).write_text(f"{when:%Y-%m-%d %H:%M:%S.%f} UTC", encoding="utf-8")
        with Gradebook(cfg.CourseDirectory.db_url) as gb:
            for student, group in by_student.items():
                names = {k: v for f in group for k, v in f.names.items()}
                gb.update_or_create_student(student, **names)
    return result
