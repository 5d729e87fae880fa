"""Reading an LMS download: every uploaded file with its student, its notebook and the time it was uploaded.

Whose file it is comes from what the LMS wrote, never from what the student typed. In a download with a folder
per student (`2023123456_张三/scoring.ipynb`), the folder decides: nbgrader's pattern,
`c.FileNameCollectorPlugin.named_regexp`, is applied to the folder's name joined to the file's with "_", and the
folder's name must be the whole of the LMS's prefix (the match's `file_id` starts with the file's name). In a flat
download, the LMS's own prefix of the file's name decides (the pattern is anchored at the start). Everything
below the LMS's folder or after its prefix is the student's: a file there whose own name claims another student
stays with the folder's student, with a note, and a folder whose files claim several other students is not a
student's folder (it is listed, not collected). An entry whose name an LMS never writes (`..`, an absolute path,
control characters, a part over 255 bytes) creates no student; one folder around the whole download (a teacher's
re-zip) whose name is not a student's is looked through.

Each notebook goes to the assignment whose released notebook it is named after; one named after another
assignment's released notebook is listed for that assignment, never taken for this one.

Zip entry names are decoded once per archive: an entry marked UTF-8 (flag bit 11) or carrying an Info-ZIP
Unicode Path field whose CRC matches its raw name (APPNOTE 4.6.9) is read as it says; the other names are UTF-8
only if all of them are valid UTF-8, else in the archivers' legacy code page `c.LMSFileNames.zip_encoding`
(GB18030, a superset of GBK, as Windows' own zip writes on a Chinese system; CP437 for old Western archivers).
GBK bytes can happen to be valid UTF-8 (`郑一` reads as `֣һ`), so one name proves nothing; a GBK character may
contain the byte of "\\", so names are decoded before any path is split.

A download may expand to at most `c.LMSFileNames.max_download_mb` (counted while copying, not taken from the
headers); links and other special entries are listed, not unpacked.

Times are compared in UTC. A time without a zone (in a file name, or a zip entry's time, which is the LMS's
clock) is read in `c.LMSFileNames.timezone`; a file of a folder has the time of its last change.
"""
import datetime
import re
import stat
import struct
import unicodedata
import zipfile
import zlib
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from nbgrader.utils import parse_utc
from traitlets import Enum, Integer, Unicode

from .reading import MAX_FILE_BYTES
from .staging import student_id_problem

UNICODE_PATH = 0x7075  # Info-ZIP Unicode Path extra field
MAX_PART_BYTES = 255  # longest file or folder name a file system (and so an LMS) writes
CHUNK = 1 << 20
# How an LMS or a browser names a later copy of the same file: "scoring (1)", "scoring（1）", "scoring-2".
COPY_SUFFIX = re.compile(r"(\s*[\(（](?P<paren>\d+)[\)）]|-(?P<dash>\d+))$")
TIME_FORMATS = ("%Y-%m-%d-%H-%M-%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y%m%d%H%M%S", "%Y%m%d-%H%M%S",
                "%Y-%m-%d %H:%M", "%Y-%m-%d-%H-%M", "%Y%m%d%H%M")
ZONE_WORDS = re.compile(r"\s*(UTC|UCT|GMT|Z)$", re.I)
SYSTEM_FILES = {".DS_Store", "Thumbs.db", "desktop.ini"}  # written by the archiver's system, not by a student
MOODLE_FOLDER = re.compile(r"_assignsubmission_[a-z]+_$")  # "<full name>_<participant id>_assignsubmission_file_"
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # make a name display reversed
COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "尉迟", "公孙", "慕容", "令狐", "长孙", "宇文",
                     "司徒", "夏侯", "轩辕", "端木", "独孤", "南宫", "西门", "万俟", "闻人", "赫连", "澹台", "公冶")
# Why an entry is not collected: the same words for every entry of a kind, so that they can be counted.
NOT_NOTEBOOK = "不是 notebook"
NO_MATCH = "文件名不符合 c.FileNameCollectorPlugin.named_regexp"
NOT_PLAIN = "不是 LMS 会写的名字（含 ..、绝对路径、控制字符或超过 255 字节），不据此认定学生"
ODD_NAME = "LMS 的文件夹或前缀之后，学生自己起的文件名含控制字符或超过 255 字节"  # taken in under a safe name
NOT_STUDENT_FOLDER = "所在文件夹的名字不是 LMS 的学生文件夹名（不符合 named_regexp），不按文件自己的名字认定学生"
LINK = "是符号链接（zip 中的链接不解开）"
SPECIAL = "是特殊文件（设备、管道等），不解开"
ENCRYPTED = "加了密码，无法解开"
BROKEN = "在 zip 中已损坏（CRC 或压缩数据出错）"
TOO_LARGE = f"过大（超过 {MAX_FILE_BYTES >> 20} MB）"


# The file names the LMSs the README documents write (`c.LMSFileNames.preset`), as nbgrader's named_regexp.
PRESETS = {
    # 2023123456_张三_scoring.ipynb (the course's own default)
    "default": r"^(?P<student_id>[A-Za-z0-9]+)_(?P<full_name>[^_]+)_(?P<file_id>.+\.ipynb)$",
    # flat: zhangsan_LATE_51234_900001_作业1.ipynb, a re-submission adds "-1"
    "canvas": r"^(?P<sortable_name>[a-z0-9]+)_(?:LATE_)?(?P<student_id>\d+)_\d+_(?P<file_id>.+\.ipynb)$",
    # a folder per submission: 张三_812_assignsubmission_file_/scoring.ipynb
    "moodle": r"^(?P<full_name>[^_]+)_(?P<student_id>\d+)_assignsubmission_file__(?P<file_id>.+\.ipynb)$",
    # flat: 作业 1_2023000001_attempt_2026-10-09-21-00-00_scoring.ipynb, with a receipt .txt per attempt
    "blackboard": (r"^.+?_(?P<student_id>[A-Za-z0-9.-]+)_attempt_(?P<timestamp>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)"
                   r"_(?P<file_id>.+\.ipynb)$"),
}


class LMSFileNames(FileNameCollectorPlugin):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's collector, applied to the file's own name (not its whole path)."""

    preset = Enum(["", *PRESETS], "", help="The LMS whose file names the download has: 'moodle', 'canvas', "
                                          "'blackboard' or 'default' (2023123456_张三_scoring.ipynb). Empty: "
                                          "c.FileNameCollectorPlugin.named_regexp as configured.").tag(config=True)

    zip_encoding = Unicode("gb18030", help="How to read zip entry names that are neither marked nor valid UTF-8: "
                                           "'gb18030' (GBK, Windows on a Chinese system) or 'cp437'.").tag(config=True)
    timezone = Unicode("", help="The LMS's time zone (e.g. 'Asia/Shanghai'): times in file names and zip entries "
                                "that carry no zone are read in it. Empty: this machine's zone.").tag(config=True)
    roster = Unicode("", help="A CSV, relative to the course folder, mapping the ids the LMS writes to student "
                              "numbers and names (see intake/roster.py). Empty: the LMS's ids are the students' "
                              "ids.").tag(config=True)
    max_download_mb = Integer(2048, help="The most a download may expand to, in MiB: 2 GiB holds a class of 200 "
                                         "with 10 MB each (a notebook with its figures is usually under 5 MB); "
                                         "what lies beyond is listed, not unpacked.").tag(config=True)

    def collect(self, submitted_file: str) -> dict[str, str] | None:
        return self.match(Path(submitted_file).name)

    def match(self, name: str, prefix: str = "") -> dict[str, str] | None:
        """The pattern's groups for the file `name`, or for `prefix` (a folder's name) joined to it with "_" when
        the folder's name is the whole of what the pattern reads before `file_id`; None otherwise. (nbgrader's own
        `_match` logs a warning for every name that does not match.)"""
        m = self._match(name, prefix)
        return m.groupdict() if m else None

    @property
    def pattern(self) -> str:
        return PRESETS[self.preset] if self.preset else str(self.named_regexp)

    def _match(self, name: str, prefix: str = "") -> re.Match[str] | None:
        if Path(name).suffix not in self.valid_ext or not self.pattern:
            return None
        text = f"{prefix}_{name}" if prefix else name
        m = re.match(self.pattern, text, re.S)  # re.S: a student's part of the name may hold a line break
        if not m or (prefix and m.start("file_id") != len(prefix) + 1):
            return None
        return m

    def owner(self, name: str, prefix: str = "") -> dict[str, str] | None:
        """The pattern's groups for a file of any kind (a notebook, a zip, a PDF, a name no file system holds)
        whose LMS folder `prefix` or LMS prefix names a student, matched as if it were a notebook; None where the
        LMS's part does not match or is not a name an LMS writes."""
        if Path(name).suffix not in self.valid_ext:
            name = f"{Path(name).stem}.ipynb"
        m = self._match(name, prefix)
        if m is None or _part_problem(f"{prefix}_{name}"[:m.start("file_id")] if prefix else name[:m.start("file_id")]):
            return None
        return m.groupdict()

    def zone(self) -> zoneinfo.ZoneInfo | None:
        return zoneinfo.ZoneInfo(self.timezone) if self.timezone else None

    def to_utc(self, naive: datetime.datetime) -> datetime.datetime:
        """A time read without a zone (the LMS's clock), as naive UTC."""
        aware = naive.replace(tzinfo=self.zone()) if self.timezone else naive.astimezone()
        return aware.astimezone(datetime.UTC).replace(tzinfo=None)

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
            aware.astimezone(datetime.UTC).replace(tzinfo=None)


@dataclass
class Upload:
    path: Path | None  # the file, unpacked (None: not a notebook, not unpacked)
    parts: list[str]  # its path in the download, folder by folder ([name] for a file at the top)
    when: datetime.datetime  # upload time, naive UTC
    student: str = ""
    notebook: str = ""  # the released notebook it is for
    names: dict[str, str] = field(default_factory=dict)  # first_name / last_name for the gradebook
    refused: str = ""  # why this upload of a student the LMS names cannot be graded ("" if it can)
    note: str = ""  # how it was taken in, when not as uploaded (from inside a zip, under a safe name)

    @property
    def name(self) -> str:
        """The file's name as the student's LMS shows it."""
        return self.parts[-1]

    @property
    def shown(self) -> str:
        return _shown("/".join(self.parts))

    @property
    def kind(self) -> str:
        """"notebook", "zip" or "other" by the file's name."""
        suffix = Path(self.name).suffix.lower()
        return "notebook" if suffix == ".ipynb" else "zip" if suffix == ".zip" else "other"

    @property
    def copy_number(self) -> int:
        """1 for "x (1).ipynb" or "x-1.ipynb" (the LMS's second copy), 0 for the first."""
        m = COPY_SUFFIX.search(Path(self.name).stem)
        return int(m.group("paren") or m.group("dash")) if m else 0


def split_name(full: str) -> tuple[str, str]:
    """(last_name, first_name) of a Chinese name: the surname first, as formgrader shows "last, first"."""
    full = full.strip()
    if not full or not re.match(r"^[\u4e00-\u9fff·]+$", full):
        return full, ""
    surname = 2 if full.startswith(COMPOUND_SURNAMES) and len(full) > 2 else 1
    return full[:surname], full[surname:]


def _raw_name(info: zipfile.ZipInfo) -> bytes:
    """The name's bytes as stored in the archive (zipfile decoded unmarked names as CP437)."""
    return info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")


def unicode_path(info: zipfile.ZipInfo) -> str | None:
    """The Info-ZIP Unicode Path field's name, if the field is there, well formed, and its CRC32 is that of the
    header's raw name (else the name was changed by a tool that did not know the field: APPNOTE 4.6.9)."""
    extra = info.extra
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        if kind == UNICODE_PATH and size > 5 and len(extra) >= 4 + size and extra[4] == 1:
            crc = struct.unpack("<I", extra[5:9])[0]
            if crc != zlib.crc32(_raw_name(info)):
                return None
            try:
                return extra[9:4 + size].decode("utf-8")
            except UnicodeDecodeError:
                return None
        extra = extra[4 + size:]
    return None


def archive_names(infos: list[zipfile.ZipInfo], legacy: str = "gb18030") -> list[str]:
    """The names of a zip's entries as their archiver meant them: one decision for the whole archive."""
    marked = [info.filename if info.flag_bits & 0x800 else unicode_path(info) for info in infos]
    unmarked = [_raw_name(info) for info, name in zip(infos, marked, strict=True) if name is None]
    try:
        for raw in unmarked:
            raw.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        encoding = legacy
    return [name if name is not None else _raw_name(info).decode(encoding, errors="replace")
            for info, name in zip(infos, marked, strict=True)]


def _part_problem(part: str) -> bool:
    """Whether a name holds what no file system an LMS writes holds: control characters, display-reversing
    marks, more than 255 bytes."""
    return (any(unicodedata.category(ch) == "Cc" or ch in BIDI_CONTROLS for ch in part)
            or len(part.encode("utf-8")) > MAX_PART_BYTES)


def name_problem(name: str) -> str:
    """Why a path in a download is not one an LMS writes ("" if it is): NOT_PLAIN for `..`, an absolute path or a
    folder no file system holds; ODD_NAME when only the file's own name is one (the student's part of it: the
    LMS's folder or prefix is checked when the student is read, `LMSFileNames.owner`)."""
    parts = re.split(r"[\\/]", name)
    if (name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts
            or any(_part_problem(p) for p in parts[:-1])):
        return NOT_PLAIN
    return ODD_NAME if _part_problem(parts[-1]) else ""


def _parts(name: str) -> list[str]:
    return [p for p in re.split(r"[\\/]", name) if p not in ("", ".")]


def _shown(name: str, limit: int = 120) -> str:
    """A name for the listing: control characters escaped, long names cut."""
    text = "".join(ch if unicodedata.category(ch) != "Cc" and ch not in BIDI_CONTROLS else ascii(ch)[1:-1]
                   for ch in name)
    return text if len(text) <= limit else text[:limit] + f"…（共 {len(name)} 个字符）"


def unpack(archive: Path, into: Path, plugin: LMSFileNames,
           limit_mb: int | None = None) -> tuple[list[Upload], list[tuple[str, str]]]:
    """([Upload], skipped [(name, why)]) of a zip: every notebook entry written as `into/<k>/file`, counting the
    bytes as they are written, nothing beyond the size limits; links, special entries and broken ones listed."""
    uploads: list[Upload] = []
    skipped: list[tuple[str, str]] = []
    limit_mb = plugin.max_download_mb if limit_mb is None else limit_mb
    left = limit_mb << 20
    beyond = f"超出下载解压后的上限 {limit_mb} MB（c.LMSFileNames.max_download_mb），没有解开"
    with zipfile.ZipFile(archive) as z:
        infos = z.infolist()
        for k, (info, name) in enumerate(zip(infos, archive_names(infos, plugin.zip_encoding), strict=True)):
            mode = info.external_attr >> 16 if info.create_system == 3 else 0  # Unix modes: only from Unix archivers
            if info.is_dir() or stat.S_ISDIR(mode):
                continue
            problem = name_problem(name)
            why = ((problem if problem != ODD_NAME else "") or (LINK if stat.S_ISLNK(mode) else "")
                   or (SPECIAL if stat.S_IFMT(mode) not in (0, stat.S_IFREG) else "")  # 0: only permissions
                   or (ENCRYPTED if info.flag_bits & 0x1 else "")
                   or (TOO_LARGE if info.file_size > MAX_FILE_BYTES else "") or (beyond if left <= 0 else ""))
            if why or not _parts(name):
                skipped.append((_shown(name), why or NOT_PLAIN))
                continue
            when = plugin.to_utc(datetime.datetime(*info.date_time))
            if Path(name).suffix.lower() not in (*plugin.valid_ext, ".zip"):  # listed, or the archiver's: not unpacked
                uploads.append(Upload(None, _parts(name), when))
                continue
            target = into / f"{k:05d}" / "file"
            target.parent.mkdir(parents=True)
            written = _copy(z, info, target, min(MAX_FILE_BYTES, left))
            if written is None:
                target.unlink()
                skipped.append((_shown(name), BROKEN))
            elif written < 0:  # stopped: more came out than the limit
                target.unlink()
                download_full = left <= MAX_FILE_BYTES  # the download's limit stopped it, not the file's
                skipped.append((_shown(name), beyond if download_full else TOO_LARGE))
                left = 0 if download_full else left
            else:
                left -= written
                uploads.append(Upload(target, _parts(name), when))
    return uploads, skipped


def _copy(z: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, most: int) -> int | None:
    """Copy an entry, stopping as soon as more than `most` bytes have come out: the bytes written, -1 when it
    stopped, None when the entry is broken."""
    written = 0
    try:
        with z.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(CHUNK):
                written += len(chunk)
                if written > most:
                    return -1
                dst.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError):
        return None
    return written


def from_folder(folder: Path) -> tuple[list[Upload], list[tuple[str, str]]]:
    uploads: list[Upload] = []
    skipped: list[tuple[str, str]] = []
    for path in sorted(folder.rglob("*")):
        shown = str(path.relative_to(folder))
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            skipped.append((_shown(shown), LINK if stat.S_ISLNK(mode) else SPECIAL))
        elif name_problem(shown) == NOT_PLAIN:
            skipped.append((_shown(shown), NOT_PLAIN))
        elif path.stat().st_size > MAX_FILE_BYTES:
            skipped.append((_shown(shown), TOO_LARGE))
        else:
            when = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC).replace(tzinfo=None)
            uploads.append(Upload(path, list(path.relative_to(folder).parts), when))
    return uploads, skipped


def _archiver_file(upload: Upload) -> bool:
    return upload.name in SYSTEM_FILES or upload.name.startswith("._") or upload.parts[0] == "__MACOSX"


def _unwrap(uploads: list[Upload], plugin: LMSFileNames) -> None:
    """Look through folders around the whole download (a teacher's re-zip) whose names are not a student's, nor
    a Moodle student's folder (which a pattern for another LMS does not match)."""
    while uploads and all(len(u.parts) > 1 for u in uploads) and len({u.parts[0] for u in uploads}) == 1:
        if MOODLE_FOLDER.search(uploads[0].parts[0]) or any(plugin.match(u.name, u.parts[0]) for u in uploads):
            break
        for upload in uploads:
            upload.parts = upload.parts[1:]


def _notebook(file_id: str, released: list[str], others: dict[str, str]) -> tuple[str, str]:
    """(this assignment's notebook, "") for a file the student named `file_id`, or ("", why not)."""
    stem = COPY_SUFFIX.sub("", Path(file_id).stem)
    named = [(len(Path(n).stem), n, "") for n in released if Path(n).stem in stem]
    named += [(len(Path(n).stem), n, aid) for n, aid in others.items() if n not in released and Path(n).stem in stem]
    exact = [item for item in named if f"{stem}.ipynb" == item[1]]
    if exact or named:
        _, notebook, aid = max(exact or named)
        if not aid:
            return notebook, ""
        return "", f"是作业 {aid} 的 {notebook}，不收入本作业（用 --assignment {aid} 收集）"
    if len(released) == 1:
        return released[0], ""  # one notebook per assignment: whatever the student called it
    return "", f"对应不到作业中的 notebook（{'、'.join(released)}）"


def check_download(source: Path) -> None:
    """A clear error for a download that is not a zip: missing, another kind of archive, a page saved instead of
    the file, or a zip cut short (its directory is at the end)."""
    if not source.exists():
        raise FileNotFoundError(f"找不到 {source}：请检查路径 / no such file or folder")
    with open(source, "rb") as f:
        head = f.read(8)
    if zipfile.is_zipfile(source):
        return
    if head.startswith(b"PK"):
        raise ValueError(f"{source} 是不完整或已损坏的 zip（找不到 zip 末尾的目录）：可能没有下载完整，请重新下载 / "
                         "a truncated or corrupt zip: download it again")
    kinds = {b"Rar!": "RAR 压缩包", b"7z\xbc\xaf": "7z 压缩包", b"\x1f\x8b": "gzip 压缩包", b"<!DOC": "网页（HTML）",
             b"<html": "网页（HTML）", b"%PDF": "PDF 文件"}
    kind = next((name for magic, name in kinds.items() if head.startswith(magic)), "")
    raise ValueError(f"{source} 不是 zip 文件" + (f"，而是{kind}" if kind else "") + "：course collect 要 LMS 下载的 zip，"
                     "或解压后的文件夹 / not a zip file or a folder")


def _safe_name(name: str) -> str:
    """A name the file system holds for a file the student named with control characters or at great length."""
    text = "".join(ch for ch in name if unicodedata.category(ch) != "Cc" and ch not in BIDI_CONTROLS)
    stem, suffix = Path(text).stem, Path(text).suffix
    while len((stem + suffix).encode("utf-8")) > 200:
        stem = stem[:-1]
    return (stem + suffix) or "upload.ipynb"


def _from_zip(upload: Upload, own: str, scratch: Path, plugin: LMSFileNames, released: list[str],
              others: dict[str, str]) -> str:
    """A student's upload that is itself a zip: the one notebook inside it for this assignment becomes the upload
    (returns its name, with a note), else the upload is refused with what the zip holds. Only this level is
    opened; what comes out counts against the same limits."""
    assert upload.path is not None  # zips are unpacked (`unpack`) or on disk (`from_folder`)
    try:
        inner, _ = unpack(upload.path, scratch / f"inner-{id(upload)}", plugin, limit_mb=MAX_FILE_BYTES >> 20)
    except (zipfile.BadZipFile, OSError):
        upload.refused = f"上传的是 {_shown(own)}，但它不是能打开的 zip"
        return own
    notebooks = [u for u in inner if u.path is not None and u.kind == "notebook" and not _archiver_file(u)
                 and ".ipynb_checkpoints" not in u.parts and not _notebook(u.name, released, others)[1]]
    if len(notebooks) != 1:
        listed = "、".join(_shown(u.name) for u in notebooks[:3]) + (" 等" if len(notebooks) > 3 else "")
        upload.refused = (f"上传的是压缩包 {_shown(own)}，里面" + (f"有 {len(notebooks)} 个本作业的 notebook（{listed}），"
                                                               "无法确定评哪一个" if notebooks else "没有本作业的 notebook"))
        return own
    upload.path, name = notebooks[0].path, notebooks[0].name
    upload.note = f"从上传的压缩包 {_shown(own)} 中取出 {_shown(name)} 评分"
    return name


def read_download(source: Path, scratch: Path, plugin: LMSFileNames, released: list[str],
                  others: dict[str, str] | None = None) -> tuple[list[Upload], list[tuple[str, str]], list[str]]:
    """([Upload] with student, notebook and names found, unmatched [(name, why)], notes) of a zip or a folder.
    `released`: this assignment's notebook names; `others`: {notebook name: assignment} of the other ones."""
    if source.is_dir():
        uploads, unmatched = from_folder(source)
    else:
        check_download(source)
        try:
            uploads, unmatched = unpack(source, scratch, plugin)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ValueError(f"{source} 无法作为 zip 读取（{exc}）：可能没有下载完整，请重新下载 / the zip cannot be "
                             "read, download it again") from None
    archiver = [u for u in uploads if _archiver_file(u)]
    notes = [f"跳过了压缩软件自己写的 {len(archiver)} 个文件（__MACOSX、.DS_Store 等）"] if archiver else []
    uploads = [u for u in uploads if u not in archiver]
    _unwrap(uploads, plugin)
    found: list[Upload] = []
    claims: dict[str, set[str]] = {}  # LMS folder -> {student ids its files claim}
    claim_notes: list[tuple[str, str]] = []
    for upload in uploads:
        folder = upload.parts[0] if len(upload.parts) > 1 else ""
        info = plugin.owner(upload.name, folder)
        if not info:
            unmatched.append((upload.shown, NOT_PLAIN if name_problem(upload.name) else
                              NOT_NOTEBOOK if upload.kind != "notebook" else
                              NOT_STUDENT_FOLDER if folder and plugin.match(upload.name) else NO_MATCH))
            continue
        problem = student_id_problem(info["student_id"])
        if problem:
            unmatched.append((upload.shown, problem))
            continue
        upload.student = info["student_id"]
        if info.get("timestamp"):
            upload.when = plugin.parse_time(info["timestamp"]) or upload.when
        upload.names = {k: info[k] for k in ("first_name", "last_name") if info.get(k)}
        if info.get("full_name"):
            upload.names["last_name"], upload.names["first_name"] = split_name(info["full_name"])
        matched = upload.name if upload.kind == "notebook" else f"{Path(upload.name).stem}.ipynb"
        own = upload.name if folder else upload.name[len(matched) - len(info["file_id"]):]  # what the student typed
        if upload.kind == "other":
            upload.refused = f"上传的是 {_shown(own)}（不是 notebook）"
            found.append(upload)
            continue
        if upload.kind == "zip":
            own = _from_zip(upload, own, scratch, plugin, released, others or {})
            if upload.refused:
                found.append(upload)
                continue
        odd = bool(name_problem(own))
        if odd:
            own = _safe_name(own)
        claimed = [c for c in [plugin.match(own)] + [plugin.match(upload.name, sub) for sub in upload.parts[1:-1]]
                   if c and c["student_id"] != upload.student]
        if claimed:
            claims.setdefault(folder, set()).update(c["student_id"] for c in claimed)
            claim_notes.append((folder, f"{upload.student}：{upload.shown} 自称属于 "
                                f"{'、'.join(c['student_id'] for c in claimed)}，但 LMS 写明它是 {upload.student} "
                                f"的（{'文件夹' if folder else '文件名前缀'}），仍算作 {upload.student} 的，不会交给别的学生"))
            own = claimed[0]["file_id"] if plugin.match(own) else own
        upload.notebook, why = _notebook(own, released, others or {})
        if why:
            unmatched.append((upload.shown, why))
            continue
        if odd:
            upload.note = f"上传的文件名含控制字符或超过 255 字节（{upload.shown}），按 {upload.notebook} 收取"
        found.append(upload)
    wrappers = {folder for folder, ids in claims.items() if folder and len(ids) > 1}
    for upload in [u for u in found if len(u.parts) > 1 and u.parts[0] in wrappers]:
        found.remove(upload)
        unmatched.append((_shown(upload.shown), "所在文件夹里的文件自称属于好几名不同的学生：它不是一名学生的文件夹"
                                                "（像是整个下载外面又套了一层），没有收集；请收集它里面的内容"))
    return found, unmatched, notes + [note for folder, note in claim_notes if folder not in wrappers]
