"""Student versions: nbgrader's generate_assignment, a check that nothing secret leaked, and a record of
what was released (`released.json` in the course folder: a checksum per notebook).

Once students have submitted, releasing again would change the tests applied to work already handed in
(nbgrader grades with the tests stored in the gradebook at release time), so it is refused unless forced.
"""
import datetime
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import GenerateAssignment
from traitlets.config import Config

from ..cells import MARKERS, REGION, is_answer_cell
from ..course import Folders, coursedir, folders
from ..files import write_atomic

RECORD = "released.json"


class LeakError(Exception):
    """A student version contains solution code, hidden tests or a sample answer."""


class ReleaseRefused(Exception):
    """Releasing again would change what is graded for students who have already submitted."""


def checksums(folder: str | os.PathLike[str]) -> dict[str, str]:
    """{notebook name: sha256} of the notebooks in `folder`."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).glob("*.ipynb"))}


def record(root: str | os.PathLike[str]) -> dict[str, Any]:
    """{assignment: {"released": time, "release": {notebook: sha256}, "source": {notebook: sha256}}}."""
    try:
        found: dict[str, Any] = json.loads((Path(root) / RECORD).read_text(encoding="utf-8"))
        return found
    except FileNotFoundError:
        return {}


def submission_count(db_url: str, assignment: str) -> int:
    with Gradebook(db_url) as gb:
        try:
            return len(gb.find_assignment(assignment).submissions)
        except MissingEntry:
            return 0


FORCE_EXPLAINED = ("重新发布后：已评分的提交保留现有成绩和人工评分；但之后再评分（course grade）时，"
                   "所有提交（包括已经交上来的）都按新版本的测试和分值评分；学生手里的旧版 notebook 不会自动更新。"
                   "若新旧版本的评分单元格不同（增删或改名），nbgrader 会拒绝，需要先删除该作业的提交。")


def release(cfg: Config, root: str | os.PathLike[str], assignment: str, force: bool = False,
            say: Callable[[str], object] = print) -> list[Path]:
    """Generate, check and record one assignment's student version; returns the checked notebook paths."""
    root = Path(root)
    if not force and changes_since_release(root, assignment) == []:
        say(f"  ＝ {assignment} 自上次发布以来没有改动")
        return Folders(cfg).released_notebooks(assignment)
    submitted = submission_count(cfg.CourseDirectory.db_url, assignment)
    if submitted and not force:
        raise ReleaseRefused(f"{assignment} 已有 {submitted} 份提交，不能重新发布：那会改变已提交作业的评分依据。"
                             f"确需重新发布时加 --force。{FORCE_EXPLAINED}")
    if submitted:
        say(f"⚠ {assignment} 已有 {submitted} 份提交，按 --force 重新发布。{FORCE_EXPLAINED}")
    checked = release_all(cfg, root, [assignment])
    done = record(root)
    done[assignment] = {
        "released": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "release": checksums(Folders(cfg).release(assignment)),
        "source": checksums(Folders(cfg).source(assignment))}
    write_atomic(root / RECORD, json.dumps(done, ensure_ascii=False, indent=1, sort_keys=True))
    return checked


def changes_since_release(root: str | Path, assignment: str) -> list[str] | None:
    """What differs from the record of `assignment` (empty when nothing); None if it was never released."""
    entry = record(root).get(assignment)
    if entry is None:
        return None
    where, notes = folders(root), list[str]()
    for name, folder in (("release", where.release(assignment)), ("source", where.source(assignment))):
        if checksums(folder) != entry[name]:
            notes.append(f"{folder.relative_to(where.root)} 在发布后改动过")
    return notes


def generate(cfg: Config, assignment: str) -> None:
    """Write `release/<assignment>/` and record the assignment in the gradebook."""
    converter = GenerateAssignment(coursedir=coursedir(cfg, assignment), config=cfg)
    converter.force = True
    converter.create_assignment = True
    converter.start()


def secret_lines(nb: NotebookNode, hidden_only: bool = False) -> set[str]:
    """Distinctive lines that only occur inside solution or hidden-test regions (and sample answers).

    `hidden_only`: just the hidden tests' lines (a student's feedback may show the student's own code).
    """
    secret: set[str] = set()
    public: set[str] = set()
    for cell in nb.cells:
        text = cell.source
        if hidden_only:
            text = "\n".join(m.group(0) for m in REGION.finditer(text) if m.group(1) == "BEGIN HIDDEN TESTS")
        elif not REGION.search(text) and cell.cell_type == "markdown" and is_answer_cell(cell):
            secret.update(line.strip() for line in text.splitlines())  # nbgrader replaces the whole answer
            continue
        secret.update(line.strip() for m in REGION.finditer(text) for line in m.group(2).splitlines())
        public.update(line.strip() for line in REGION.sub("", text).splitlines())
    return {line for line in secret - public if len(line) >= 12 and line.strip("#").strip()}


def check_release(source_nb_path: str | os.PathLike[str], release_nb_path: str | os.PathLike[str]) -> None:
    """Raise LeakError naming what a student version gives away."""
    source = nbformat.read(source_nb_path, as_version=4)
    released = nbformat.read(release_nb_path, as_version=4)
    text = "\n".join(cell.source for cell in released.cells)
    problems = [f"marker '{m}'" for m in MARKERS if m in text]
    lines = {line.strip() for line in text.splitlines()}
    problems += [f"line from a solution or hidden test: {line!r}" for line in sorted(secret_lines(source) & lines)]
    if problems:
        raise LeakError(f"{release_nb_path}: " + "; ".join(problems[:10]))


def release_all(cfg: Config, root: str | os.PathLike[str], assignment_ids: Iterable[str]) -> list[Path]:
    """Regenerate every student version and check it; returns the checked notebook paths."""
    checked: list[Path] = []
    for aid in assignment_ids:
        generate(cfg, aid)
        for src in sorted(Folders(cfg).source(aid).glob("*.ipynb")):
            rel = Folders(cfg).release(aid) / src.name
            if not rel.exists():
                raise LeakError(f"{rel} was not generated")
            check_release(src, rel)
            checked.append(rel)
    return checked
