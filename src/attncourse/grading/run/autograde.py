"""Autograding a class with nbgrader's own Autograde converter, several students at once.

For each staged submission (intake/staging.py): grade it into a scratch folder, hold back the autograded points
of a submission flagged for review, and only then move the result into the autograded folder and keep its record
(`records.write_record`). A run that is killed half-way leaves no finished-looking grade: the next run
grades that submission again. An unchanged submission with a record keeps its grade (and its manual grades).
"""
import copy
import functools
import gc
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from nbformat import NotebookNode
from nbgrader.api import Comment, Grade, Gradebook, MissingEntry
from nbgrader.converters import Autograde
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata, ClearHiddenTests, Execute, OverwriteCells, SaveAutoGrades
from sqlalchemy.orm import joinedload
from traitlets.config import Config

from .. import records
from ..course import Folders, coursedir, grading_dir, kernel_env
from ..files import replace_dir
from ..gradebook_engines import one_schema_check, share_engines
from ..intake.staging import Intake
from ..isolation import sandbox as sandboxes
from ..isolation.preload import PreloadedProvisioner, preloaded_kernels
from ..model import Outcome, Status, SubmissionResult
from ..records import Record
from . import diagnosis, execution, ta_view
from .cluster import Cluster, Workers
from .execution import EXECUTING, RESULT, TURN, WORKERS, CourseExecute
from .executors import Executors

# Seconds a thread runs Python before another may (CPython's default is 0.005). A grading thread waits on its
# kernel hundreds of times per notebook (a request through the probe's socket for each call into the student's
# code); when its reply comes while another thread runs Python, it waits for the interpreter lock up to this long.
SWITCH_INTERVAL = 0.0005
# The grader's garbage collector during a run: a young collection every 20,000 allocations, not 700. What a
# notebook's grading allocates mostly dies young or lives long (nbgrader's ORM objects, caches); with Python's
# thresholds the demo class's run (30 notebooks, 2 jobs) spent 0.81 s in collections, 0.41 of them in 4 full ones;
# with these, 0.20 s in 11 young ones.
GC_THRESHOLD = (20_000, 10, 10)
# Threads per job of a local run: `jobs` submissions execute at once (EXECUTING), and meanwhile others keep their
# books (nbgrader's steps before and after the execution, one thread at a time: TURN), so that a job's next
# submission is ready when its kernel ends.
THREADS_PER_JOB = 2


class CourseAutograde(Autograde):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's Autograde, safe in threads, handing each notebook's execute step a `SubmissionResult`."""

    def __init__(self, result: SubmissionResult, workers: Workers | Executors | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result, self.workers = result, workers

    def init_single_notebook_resources(self, notebook_filename: str) -> dict[str, Any]:
        resources: dict[str, Any] = super().init_single_notebook_resources(notebook_filename)
        resources[RESULT] = self.result
        if self.workers is not None:
            resources[WORKERS] = self.workers
        return resources

    def convert_single_notebook(self, notebook_filename: str) -> None:
        # As Autograde's, minus `utils.setenv(NBGRADER_EXECUTION=...)`: nbgrader 0.9.6's setenv deletes
        # the variable afterwards, under the feet of other threads. `grade_class` sets it for the run.
        self._sanitizing = True
        self._init_preprocessors()
        super(Autograde, self).convert_single_notebook(notebook_filename)
        notebook_filename = os.path.join(self.writer.build_directory, os.path.basename(notebook_filename))
        self._sanitizing = False
        self._init_preprocessors()
        try:
            super(Autograde, self).convert_single_notebook(notebook_filename)
        finally:
            self._sanitizing = True


class _SourceCells:
    """What OverwriteCells asks the gradebook about a notebook's cells, answered from the run's `Instructor`
    (read once per run, `execution.INSTRUCTORS`), not with a query or two for each cell of each submission."""

    def __init__(self, instructor: execution.Instructor) -> None:
        self.instructor = instructor

    def find_source_cell(self, name: str, notebook: str, assignment: str) -> SimpleNamespace:
        if name not in self.instructor.cells:
            raise MissingEntry(f"No such source cell: {assignment}/{notebook}/{name}")
        return SimpleNamespace(name=name, source=self.instructor.sources[name], **self.instructor.cells[name])

    def find_graded_cell(self, name: str, notebook: str, assignment: str) -> SimpleNamespace:
        cell = self.find_source_cell(name, notebook, assignment)
        if cell.max_score is None:
            raise MissingEntry(f"No such grade cell: {assignment}/{notebook}/{name}")
        return cell

    def find_notebook(self, notebook: str, assignment: str) -> SimpleNamespace:
        """The notebook's source, grade, solution and task cells, each list in the gradebook's order."""
        def cells(names: list[str]) -> list[SimpleNamespace]:
            return [self.find_source_cell(name, notebook, assignment) for name in names]
        return SimpleNamespace(source_cells=cells(list(self.instructor.cells)),
                               **{f"{kind}_cells": cells(names) for kind, names in self.instructor.kinds.items()})


class CourseOverwriteCells(OverwriteCells):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's OverwriteCells, with the notebook's cells as the run read them (`_SourceCells`), and without its
    "checksum has changed" warning for a test cell the student left as released: release took its hidden tests
    out, so every test cell of every submission differs from the source (hundreds of lines in build/nbgrader.log
    that nobody needs). A locked cell the student did edit is still reported, every cell is still put back from
    the source, and a deleted graded cell is added back (`add_missing_cells`, as the course's config has it)."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id, self.db_url = info["notebook"], info["assignment"], info["db_url"]
        self.gradebook = _SourceCells(execution.INSTRUCTORS.get(self.db_url, self.notebook_id, self.assignment_id))
        nb, resources = super(OverwriteCells, self).preprocess(nb, resources)  # each cell, as nbgrader's
        if self.add_missing_cells:
            nb, resources = self.add_missing_grade_cells(nb, resources)
            nb, resources = self.add_missing_task_cells(nb, resources)
        return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any],
                        cell_index: int) -> tuple[NotebookNode, dict[str, Any]]:
        self._cell = cell  # as submitted until the checksum is reported: the source is put back afterwards
        done: tuple[NotebookNode, dict[str, Any]] = super().preprocess_cell(cell, resources, cell_index)
        return done

    def report_change(self, name: str, attr: str, old: Any, new: Any) -> None:
        if attr == "checksum":
            released = copy.deepcopy(self._cell)
            released.source = self.gradebook.find_source_cell(name, self.notebook_id, self.assignment_id).source
            ClearHiddenTests(config=self.config).preprocess_cell(released, {}, 0)  # the course's delimiters
            if released.source == self._cell.source:
                return
        super().report_change(name, attr, old, new)


class _SubmissionGrades:
    """What SaveAutoGrades asks the gradebook about one submitted notebook: its grade and its comment of each cell,
    read in two queries, not two per cell; they are the session's own objects, which SaveAutoGrades changes."""

    def __init__(self, gradebook: Gradebook, notebook: str, assignment: str, student: str) -> None:
        self.db = gradebook.db
        submitted = gradebook.find_submission_notebook(notebook, assignment, student).id
        self.rows = {kind: {row.cell.name: row for row in self.db.query(kind).options(joinedload(kind.cell))
                            .filter(kind.notebook_id == submitted)} for kind in (Grade, Comment)}
        self.where = f"{assignment}/{notebook}/{student}"

    def find_grade(self, name: str, *where: str) -> Grade:
        return self._find(Grade, name)

    def find_comment(self, name: str, *where: str) -> Comment:
        return self._find(Comment, name)

    def _find(self, kind: type, name: str) -> Any:
        if name not in self.rows[kind]:
            raise MissingEntry(f"No such {kind.__name__.lower()}: {self.where}/{name}")
        return self.rows[kind][name]


class CourseSaveAutoGrades(SaveAutoGrades):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's SaveAutoGrades in one transaction per notebook, not one per graded or answer cell (each a SQLite
    commit with its fsync, or a PostgreSQL round trip): a notebook's grades are saved all together or, on an error,
    not at all. The grades and comments it sets are read together (`_SubmissionGrades`)."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id = info["notebook"], info["assignment"]
        self.student_id, self.db_url = info["student"], info["db_url"]
        with Gradebook(self.db_url) as gradebook:
            self.gradebook = _SubmissionGrades(gradebook, self.notebook_id, self.assignment_id, self.student_id)
            session = gradebook.db
            session.commit = lambda: None  # nbgrader's commit after each cell (the session flushes before a query)
            try:
                nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)  # each cell, as nbgrader's
            finally:
                del session.commit
            session.commit()
        return nb, resources


class _SeenMetadataValidator(MetadataValidator):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's metadata check of a cell, once for each distinct cell type and nbgrader metadata: jsonschema
    checks the schema itself again on each call (0.03 s of the grader's time per notebook), and nbgrader's
    checks read nothing else of the cell but its source, for their messages. The instructor's cells are the same
    in every submission."""

    passed: set[tuple[str, str]] = set()

    def validate_cell(self, cell: NotebookNode) -> None:
        if "nbgrader" not in cell.metadata:
            return
        key = (cell.cell_type, json.dumps(cell.metadata.nbgrader, sort_keys=True, default=str))
        if key not in self.passed:
            super().validate_cell(cell)
            self.passed.add(key)


class CourseCheckCellMetadata(CheckCellMetadata):  # type: ignore[misc]  # nbgrader has no type information
    """nbgrader's CheckCellMetadata with `_SeenMetadataValidator`; the same error and log."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        try:
            _SeenMetadataValidator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise ValidationError(msg) from None
        return nb, resources


def grading_config(cfg: Config) -> Config:
    """A copy of nbgrader's config whose autograde step runs test cells in the grader (`CourseExecute`), naming
    likely mistakes from the course's catalogs."""
    cfg = copy.deepcopy(cfg)
    ours = {Execute: CourseExecute, OverwriteCells: CourseOverwriteCells, CheckCellMetadata: CourseCheckCellMetadata,
            SaveAutoGrades: CourseSaveAutoGrades}
    for steps in ("autograde_preprocessors", "sanitize_preprocessors"):
        cfg.Autograde[steps] = [ours.get(step, step) for step in Autograde.class_traits()[steps].default()]
    cfg.NotebookExporter.optimistic_validation = True  # the notebook is validated once, not after each step
    cfg.CourseExecute.course_root = str(Path(cfg.CourseDirectory.root).resolve())
    return cfg


def grade_one(cfg: Config, root: Path, intake: Intake, scratch: Path, force: bool = False, sandboxed: bool = True,
              workers: Workers | Executors | None = None) -> Outcome:
    """Grade one staged submission (executing it here, or on `workers`: a run/cluster.py `Workers` or a
    run/executors.py `Executors`) and record it."""
    if workers is not None and workers.lost:
        raise workers.lost_error()
    start = time.time()
    a, s = intake.assignment, intake.student
    db_url = cfg.CourseDirectory.db_url
    if intake.reason:  # the student's name is a folder's name, so it can name the record too
        records.write_record(root, a, s, Record(Status.FAILED, reason=intake.reason, notes=intake.notes))
        return _recorded(db_url, root, a, s, start)
    dest = Folders(cfg).autograded(s, a)
    record = records.read_record(root, a, s)
    with TURN.held():
        if not force and record and record.digest == intake.digest and (
                dest.is_dir() or record.status == Status.FAILED):
            kept = records.read_outcome(db_url, root, a, s)  # None: the gradebook lost it, grade again
            if kept is not None:
                kept.kept = True
                return kept
    result = SubmissionResult(sandboxed=sandboxed)
    with TURN.held():
        assert intake.folder is not None  # staged: it has no reason not to be graded
        cd = coursedir(cfg, a, s)
        cd.submitted_directory = str(intake.folder.parent.parent)
        cd.autograded_directory = str(scratch)
        converter = CourseAutograde(result, workers, coursedir=cd, config=cfg)
        converter.force = True
        try:
            converter.start()
        except Exception as exc:  # nbgrader has already removed the half-made autograded copy
            if workers is not None and workers.lost:  # not graded: nothing is recorded
                raise workers.lost_error() from exc
            reason = result.failure or f"评分失败：{type(exc).__name__}（详见 build/nbgrader.log）"
            records.write_record(root, a, s, Record(Status.FAILED, intake.digest, reason, result.holds,
                                                    notes=intake.notes + result.notes))
            return _recorded(db_url, root, a, s, start)
        held = records.hold(db_url, a, s, result.held) if result.held else {}
        for path in sorted((Path(scratch) / s / a).glob("*.ipynb")):
            ta_view.prepare(path, result, a, s, intake.submitted_at)
        replace_dir(Path(scratch) / s / a, dest, scratch)
        notes = intake.notes + result.notes
        records.write_record(root, a, s, Record(Status.GRADED, intake.digest, holds=result.holds, held=held,
                                                notes=notes, diagnoses=result.diagnoses))
        graded = _recorded(db_url, root, a, s, start)
    graded.timings = result.timings
    return graded


def _recorded(db_url: str, root: Path, assignment: str, student: str, start: float) -> Outcome:
    """The Outcome of the record just written."""
    found = records.read_outcome(db_url, root, assignment, student)
    assert found is not None  # its record was just written (and a graded one is in the gradebook)
    found.seconds = time.time() - start
    return found


@contextmanager
def local_executors(cfg: Config, jobs: int, sandboxed: bool) -> Iterator[Executors | None]:
    """A local run's executors (executors.py), once the preloading process serves; None where it does not."""
    if PreloadedProvisioner.zygote is None:
        yield None
        return
    executors = Executors(cfg, max(1, jobs), sandboxed)
    try:
        yield executors
    except BaseException:
        executors.close(kill=True)
        raise
    executors.close()


def grade_class(cfg: Config, intakes: list[Intake], jobs: int = 1, force: bool = False,
                progress: Callable[[int, int, Outcome], object] = lambda done, total, outcome: None,
                warn: Callable[[str], object] = print, preload: bool = True, cluster: str = "") -> list[Outcome]:
    """Autograde every staged submission of `intakes` (intake/staging.py); returns their Outcomes in input order. `progress(done, total, outcome)` is called as each one finishes.

    `preload`: kernels start as forks of a process that has imported torch and d2l (see isolation/preload.py);
    each kernel is sandboxed (isolation/sandbox.py) unless no sandbox can be made here or `preload` is False.
    `cluster`: a Dask scheduler's address; its workers execute the submissions, each in its own sandbox, with
    twice as many at once as they have threads (run/cluster.py). Raises `ClusterLost` if the cluster goes away:
    what was graded by then is recorded.
    """
    cfg = grading_config(cfg)
    share_engines()
    root = Path(cfg.CourseDirectory.root)
    workers = sandbox = None
    if cluster:
        workers = Workers(cluster, cfg, warn, Cluster(config=cfg).connect_timeout)
        jobs = 2 * workers.threads  # the coordinator's bookkeeping for one overlaps the execution of another
    elif preload:
        sandbox = sandboxes.for_grading(cfg, warn)
    work = grading_dir(root)
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="run-"))
    saved_env, saved_cwd, saved_switch = dict(os.environ), os.getcwd(), sys.getswitchinterval()
    saved_threads, saved_gc = torch.get_num_threads(), gc.get_threshold()
    os.environ.update(kernel_env(jobs))  # set once for the run: nbgrader's per-call setenv races in threads
    sys.setswitchinterval(SWITCH_INTERVAL)
    # The grader's own torch operators (the tests' oracles, diagnoses) run on one thread each: its threads grade
    # several submissions at once, and OpenMP's threads, which wait for work spinning, took the cores the kernels
    # need (the demo class, 2 jobs: 0.57-0.58 against 0.62-0.64 s per notebook)
    torch.set_num_threads(1)
    results = {}
    threads = max(1, jobs) if cluster else THREADS_PER_JOB * max(1, jobs)
    gc.freeze()  # what the run finds (the modules it imported) is left out of the full garbage collections it makes
    gc.set_threshold(*GC_THRESHOLD)
    try:
        # while the preloading process imports, the grader reads the test cells' forbidden names, which each
        # kernel's start needs (its executors, forked later, find them read), then runs what diagnosing its failed
        # tests will need
        assignments = dict.fromkeys(i.assignment for i in intakes)
        names: list[Callable[[], object]] = [
            functools.partial(execution.read_forbidden_names, cfg.CourseDirectory.db_url, a) for a in assignments]
        prepare = itertools.chain(names, diagnosis.preparation(cfg.CourseExecute.course_root, assignments))
        local = preload and not cluster
        with execution.INSTRUCTORS.during(), one_schema_check(), \
                preloaded_kernels(warn, sandbox, prepare) if local else nullcontext(), \
                local_executors(cfg, jobs, sandbox is not None) if local else nullcontext() as here, \
                EXECUTING.limited(max(1, jobs)), ThreadPoolExecutor(max_workers=threads) as pool:
            futures = {pool.submit(grade_one, cfg, root, intake, scratch / "autograded", force, sandbox is not None,
                                   workers or here): (intake.assignment, intake.student) for intake in intakes}
            for done, future in enumerate(as_completed(futures), 1):
                key = futures[future]
                try:
                    outcome = future.result()
                except Exception as exc:  # noqa: BLE001 - a toolchain error, not the student's: the caller stops on it
                    if workers is not None and workers.lost:
                        pool.shutdown(wait=False, cancel_futures=True)
                        break
                    outcome = Outcome(*key, Status.ERROR, f"{type(exc).__name__}: {exc}")
                results[key] = outcome
                progress(done, len(intakes), outcome)
    finally:  # nbgrader's converters chdir to the course root, from several threads
        gc.unfreeze()
        gc.set_threshold(*saved_gc)
        torch.set_num_threads(saved_threads)
        sys.setswitchinterval(saved_switch)
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        shutil.rmtree(scratch, ignore_errors=True)
        if workers is not None:
            workers.close()
    if workers is not None and workers.lost:
        error = workers.lost_error()
        error.graded = len(results)
        raise error
    return [results[(i.assignment, i.student)] for i in intakes]
