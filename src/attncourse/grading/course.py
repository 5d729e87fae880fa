"""The course folder as nbgrader sees it: configuration, assignments, submissions, the files an author writes."""
import os
import shutil
import sys
from collections.abc import Collection, Iterable
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

# The course's own folders beside nbgrader's (`Folders`, from nbgrader_config.py), relative to the course root:
# what an author writes there and what the tools build. Every command finds them through the functions below.
CATALOG = "catalog"  # catalog/<assignment>.py: the realistic mistakes of each unit
BUILD = "build"  # what the tools build: slides, reports, the student bundle, the demo, the grader's state
GRADING = "grading"  # build/grading/: the grader's own state (records, collect's notes) and scratch folders
DB_BUSY_SECONDS = 60  # a gradebook locked by someone else (formgrader, another run) is waited for, then retried
# What a course author writes; a scratch course (the demo, quickcheck, the benchmark, tests) copies these.
AUTHORED = ("course.toml", "nbgrader_config.py", "source", CATALOG, "notebooks", "img")


def use_this_environment() -> None:
    """Put this interpreter's bin folder first on PATH: nbgrader runs `alembic` from PATH, and it must be
    this environment's even when `.venv/bin/course` is called without activating the environment."""
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def copy_course_files(src: str | os.PathLike[str], dest: str | os.PathLike[str],
                      items: Iterable[str] = AUTHORED) -> Path:
    """Copy the course's own files and folders `items` from `src` into `dest`, replacing what is there: a
    scratch course with none of `src`'s grading state."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for item in items:
        source, target = Path(src) / item, dest / item
        if not source.exists():
            continue
        if target.is_dir():
            shutil.rmtree(target)
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
        if item == "nbgrader_config.py":  # a scratch course never writes into the course's own gradebook
            with open(target, "a", encoding="utf-8") as f:
                f.write(f"\n# a copy of the course: its own gradebook, whatever the course uses\n"
                        f"c.CourseDirectory.db_url = {'sqlite:///' + str(dest.resolve() / 'gradebook.db')!r}\n")
    return dest


def nbgrader_config(root: str | Path, submitted: str | Path | None = None) -> Config:
    """nbgrader's config from `nbgrader_config.py`, anchored at `root`. `submitted` points nbgrader at another
    folder of submissions (same layout as `submitted/`)."""
    root = Path(root).resolve()
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    cfg.CourseDirectory.root = str(root)
    cfg.CourseDirectory.db_url = gradebook_url(cfg, root)
    if submitted is not None:
        cfg.CourseDirectory.submitted_directory = str(Path(submitted).resolve())
    return cfg


def gradebook_url(cfg: Config, root: str | Path) -> str:
    """The gradebook `nbgrader_config.py` names (`c.CourseDirectory.db_url`: any database SQLAlchemy reaches, such
    as PostgreSQL), else `gradebook.db` in the course folder. A SQLite gradebook that someone else holds locked is
    waited for."""
    url = cfg.CourseDirectory.get("db_url") or f"sqlite:///{Path(root) / 'gradebook.db'}"
    if url.startswith("sqlite:") and "timeout=" not in url:
        url += f"{'&' if '?' in url else '?'}timeout={DB_BUSY_SECONDS}"
    return url


def build_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / BUILD


def grading_dir(root: str | os.PathLike[str]) -> Path:
    """build/grading/: only the grader writes here."""
    return build_dir(root) / GRADING


def catalog_path(root: str | os.PathLike[str], assignment: str) -> Path:
    return Path(root) / CATALOG / f"{assignment}.py"


def coursedir(cfg: Config, assignment_id: str = "", student_id: str = "*") -> CourseDirectory:
    cd = CourseDirectory(config=cfg)
    cd.assignment_id = assignment_id
    cd.student_id = student_id
    return cd


class Folders:
    """The course folder's names as nbgrader's config sets them (`c.CourseDirectory.source_directory`,
    `release_directory`, `submitted_directory`, `autograded_directory`, `feedback_directory` and
    `directory_structure`), through nbgrader's own `CourseDirectory.format_path`: every command finds each folder
    here, so moving one in `nbgrader_config.py` moves it for all of them."""

    def __init__(self, cfg: Config) -> None:
        self.coursedir = CourseDirectory(config=cfg)
        self.root = Path(self.coursedir.root)

    def _path(self, step: str, student: str, assignment: str) -> Path:
        return Path(os.path.normpath(self.coursedir.format_path(step, student, assignment)))

    def source(self, assignment: str = ".") -> Path:
        return self._path(self.coursedir.source_directory, ".", assignment)

    def release(self, assignment: str = ".") -> Path:
        return self._path(self.coursedir.release_directory, ".", assignment)

    def submitted(self, student: str = ".", assignment: str = ".") -> Path:
        return self._path(self.coursedir.submitted_directory, student, assignment)

    def autograded(self, student: str = ".", assignment: str = ".") -> Path:
        return self._path(self.coursedir.autograded_directory, student, assignment)

    def feedback(self, student: str = ".", assignment: str = ".") -> Path:
        return self._path(self.coursedir.feedback_directory, student, assignment)

    def released_notebooks(self, assignment: str) -> list[Path]:
        return sorted(self.release(assignment).glob("*.ipynb"))

    def assignments(self) -> list[str]:
        """Assignment ids: the folders of the source folder that hold a notebook."""
        return sorted(p.name for p in self.source().iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def folders(root: str | Path) -> Folders:
    return Folders(nbgrader_config(root))


def assignments(root: str | Path) -> list[str]:
    return folders(root).assignments()


def released_notebooks(root: str | Path, assignment: str) -> dict[str, NotebookNode]:
    """{file name: student version} of an assignment, as released."""
    return {p.name: nbformat.read(p, as_version=4) for p in folders(root).released_notebooks(assignment)}


def submissions(submitted_dir: str | Path, assignment_ids: Collection[str]) -> list[tuple[str, str]]:
    """[(assignment, student)] found in a folder laid out as `<student>/<assignment>/`."""
    found: list[tuple[str, str]] = []
    for student in sorted(p for p in Path(submitted_dir).iterdir() if p.is_dir()):
        for aid in assignment_ids:
            if (student / aid).is_dir():
                found.append((aid, student.name))
    return found


def kernel_env(jobs: int) -> dict[str, str]:
    """Environment for grading kernels: nbgrader's flag, and no thread oversubscription."""
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    return {"NBGRADER_EXECUTION": "autograde", "OMP_NUM_THREADS": str(threads)}
