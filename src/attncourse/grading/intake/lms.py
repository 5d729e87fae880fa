"""Reading an LMS download: every uploaded file with its student, its notebook and the time it was uploaded.

File names are read by nbgrader's ZipCollect collector plugin (`FileNameCollectorPlugin`) with the course's
pattern, `c.FileNameCollectorPlugin.named_regexp`, applied to each file's name, or, for a download with a folder
per student (`2023123456_张三/scoring.ipynb`), to the folder's name joined to the file's with "_".

Zip entry names are decoded as their archiver wrote them: UTF-8 when the entry says so (flag bit 11) or carries
an Info-ZIP Unicode Path field, else UTF-8 if the bytes are UTF-8 (Info-ZIP, macOS), else in the archivers'
legacy code page `c.LMSFileNames.zip_encoding` (GB18030, a superset of GBK, as Windows' own zip writes on a
Chinese system; CP437 for old Western archivers), before any path is split (a GBK character may contain the
byte of "\\"). The bytes alone cannot tell GBK from CP437, hence the setting.

Times are compared in UTC. A time without a zone (in a file name, or a zip entry's time, which is the LMS's
clock) is read in `c.LMSFileNames.timezone`; a file of a folder has the time of its last change.
"""
import datetime
import re
import shutil
import struct
import zipfile
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from nbgrader.utils import parse_utc
from traitlets import Unicode

from .reading import MAX_FILE_BYTES
from .staging import student_id_problem

MAX_DOWNLOAD_BYTES = 8 << 30  # a zip that unpacks to more than this is not unpacked further
UNICODE_PATH = 0x7075  # Info-ZIP Unicode Path extra field
# How an LMS or a browser names a later copy of the same file: "scoring (1)", "scoring（1）", "scoring-2".
COPY_SUFFIX = re.compile(r"(\s*[\(（](?P<paren>\d+)[\)）]|-(?P<dash>\d+))$")
TIME_FORMATS = ("%Y-%m-%d-%H-%M-%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y%m%d%H%M%S", "%Y%m%d-%H%M%S",
                "%Y-%m-%d %H:%M", "%Y-%m-%d-%H-%M", "%Y%m%d%H%M")
ZONE_WORDS = re.compile(r"\s*(UTC|UCT|GMT|Z)$", re.I)
SYSTEM_FILES = {".DS_Store", "Thumbs.db", "desktop.ini"}  # written by the archiver's system, not by a student
COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "尉迟", "公孙", "慕容", "令狐", "长孙", "宇文",
                     "司徒", "夏侯", "轩辕", "端木", "独孤", "南宫", "西门", "万俟", "闻人", "赫连", "澹台", "公冶")


class LMSFileNames(FileNameCollectorPlugin):
    """nbgrader's collector, applied to the file's own name (not its whole path)."""

    zip_encoding = Unicode("gb18030", help="How to read zip entry names that are neither marked nor valid UTF-8: "
                                           "'gb18030' (GBK, Windows on a Chinese system) or 'cp437'.").tag(config=True)
    timezone = Unicode("", help="The LMS's time zone (e.g. 'Asia/Shanghai'): times in file names and zip entries "
                                "that carry no zone are read in it. Empty: this machine's zone.").tag(config=True)

    def collect(self, submitted_file):
        return super().collect(Path(submitted_file).name)

    def zone(self):
        return zoneinfo.ZoneInfo(self.timezone) if self.timezone else None

    def to_utc(self, naive: datetime.datetime) -> datetime.datetime:
        """A time read without a zone (the LMS's clock), as naive UTC."""
        aware = naive.replace(tzinfo=self.zone()) if self.timezone else naive.astimezone()
        return aware.astimezone(datetime.timezone.utc).replace(tzinfo=None)

    def parse_time(self, text: str) -> datetime.datetime | None:
        """A time from a file name, exactly, as naive UTC: the formats LMSs and nbgrader's documentation use,
        with or without a zone; None if it is not a time."""
        text = text.strip()
        bare = ZONE_WORDS.sub("", text)
        for fmt in TIME_FORMATS:
            try:
                naive = datetime.datetime.strptime(bare, fmt)
            except ValueError:
                continue
            return naive if bare != text else self.to_utc(naive)
        try:
            aware = datetime.datetime.fromisoformat(text)
        except ValueError:
            try:
                return parse_utc(text) if re.search(r"\d{4}", text) else None
            except (ValueError, OverflowError):
                return None
        return self.to_utc(aware) if aware.tzinfo is None else \
            aware.astimezone(datetime.timezone.utc).replace(tzinfo=None)


@dataclass
class Upload:
    path: Path  # the file, unpacked
    name: str  # its name as the student's LMS shows it
    folder: str  # the folder it was in ("" for none)
    when: datetime.datetime  # upload time, naive UTC
    student: str = ""
    notebook: str = ""  # the released notebook it is for
    names: dict = field(default_factory=dict)  # first_name / last_name for the gradebook

    @property
    def copy_number(self) -> int:
        """1 for "x (1).ipynb" or "x-1.ipynb" (the LMS's second copy), 0 for the first."""
        m = COPY_SUFFIX.search(Path(self.name).stem)
        return int(m.group("paren") or m.group("dash")) if m else 0


def split_name(full) -> tuple[str, str]:
    """(last_name, first_name) of a Chinese name: the surname first, as formgrader shows "last, first"."""
    full = full.strip()
    if not full or not re.match(r"^[\u4e00-\u9fff·]+$", full):
        return full, ""
    surname = 2 if full.startswith(COMPOUND_SURNAMES) and len(full) > 2 else 1
    return full[:surname], full[surname:]


def entry_name(info: zipfile.ZipInfo, legacy="gb18030") -> str:
    """The name of a zip entry as its archiver meant it (see the module's docstring)."""
    if info.flag_bits & 0x800:
        return info.filename
    extra = info.extra
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        if kind == UNICODE_PATH and size > 5:
            try:
                return extra[9:4 + size].decode("utf-8")
            except UnicodeDecodeError:
                break
        extra = extra[4 + size:]
    raw = info.orig_filename.encode("cp437")  # what zipfile decoded, as the bytes in the archive
    for encoding in ("utf-8", legacy):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return info.orig_filename


def unpack(archive: Path, into: Path, plugin: LMSFileNames) -> tuple[list, list]:
    """([Upload], skipped [(name, why)]) of a zip: no links or folders of its own, nothing over the size limits."""
    uploads, skipped, total = [], [], 0
    with zipfile.ZipFile(archive) as z:
        for i, info in enumerate(z.infolist()):
            mode = info.external_attr >> 16
            if info.is_dir() or (mode and (mode & 0o170000) == 0o120000):
                continue
            parts = [p for p in re.split(r"[\\/]", entry_name(info, plugin.zip_encoding)) if p not in ("", ".", "..")]
            if not parts:
                continue
            if info.file_size > MAX_FILE_BYTES:
                skipped.append((parts[-1], f"过大（{info.file_size >> 20} MB，超过 {MAX_FILE_BYTES >> 20} MB），未收集"))
                continue
            total += info.file_size
            if total > MAX_DOWNLOAD_BYTES:
                skipped.append((parts[-1], f"下载解压后超过 {MAX_DOWNLOAD_BYTES >> 30} GB，其余文件未收集"))
                break
            target = into / f"{i:05d}" / "file"
            target.parent.mkdir(parents=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            uploads.append(Upload(target, parts[-1], parts[-2] if len(parts) > 1 else "",
                                  plugin.to_utc(datetime.datetime(*info.date_time))))
    return uploads, skipped


def from_folder(folder: Path) -> tuple[list, list]:
    uploads, skipped = [], []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        if path.stat().st_size > MAX_FILE_BYTES:
            skipped.append((path.name, f"过大（{path.stat().st_size >> 20} MB），未收集"))
            continue
        when = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc).replace(tzinfo=None)
        uploads.append(Upload(path, path.name, path.parent.name if path.parent != folder else "", when))
    return uploads, skipped


def read_download(source: Path, scratch: Path, plugin: LMSFileNames, released: list) -> tuple[list, list]:
    """([Upload] with student, notebook and names found, unmatched [(name, why)]) of a zip or a folder."""
    if source.is_file() and zipfile.is_zipfile(source):
        uploads, unmatched = unpack(source, scratch, plugin)
    elif source.is_dir():
        uploads, unmatched = from_folder(source)
    else:
        raise FileNotFoundError(f"{source} 不是 zip 文件或文件夹")
    found = []
    for upload in uploads:
        if upload.name in SYSTEM_FILES or upload.name.startswith("._") or upload.folder == "__MACOSX":
            continue
        info = plugin.collect(upload.name) or (plugin.collect(f"{upload.folder}_{upload.name}") if upload.folder
                                               else None)
        if not info:
            unmatched.append((upload.name, "文件名不符合 c.FileNameCollectorPlugin.named_regexp"
                              if upload.name.endswith(".ipynb") else "不是 notebook"))
            continue
        problem = student_id_problem(info["student_id"])
        if problem:
            unmatched.append((upload.name, problem))
            continue
        stem = COPY_SUFFIX.sub("", Path(info["file_id"]).stem)
        if f"{stem}.ipynb" in released:
            upload.notebook = f"{stem}.ipynb"
        elif len(released) == 1:
            upload.notebook = released[0]  # one notebook per assignment: whatever the student called it
        else:
            unmatched.append((upload.name, f"对应不到作业中的 notebook（{'、'.join(released)}）"))
            continue
        upload.student = info["student_id"]
        if info.get("timestamp"):
            upload.when = plugin.parse_time(info["timestamp"]) or upload.when
        upload.names = {k: info[k] for k in ("first_name", "last_name") if info.get(k)}
        if info.get("full_name"):
            upload.names["last_name"], upload.names["first_name"] = split_name(info["full_name"])
        found.append(upload)
    return found, unmatched
