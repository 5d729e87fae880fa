"""Shared fixtures: a scratch copy of the course, each unit's catalog graded once, the decks executed once.

Markers: `slow` (end to end: minutes), `needs_root` (the bubblewrap sandbox: Linux, root, bubblewrap) and
`needs_browser` (Chromium). Where root or Chromium is missing those tests are skipped with the reason; CI sets
ATTN_COURSE_NO_SKIPS=1 and then a run that skipped anything fails.
"""
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.api import Gradebook

from attncourse.grading import commands
from attncourse.grading.authoring.variants import catalog_cases, deck_only, load_catalog, source_notebook
from attncourse.grading.cells import grade_id, has_hidden_tests, is_test_cell, test_cell_ids
from attncourse.grading.course import AUTHORED, assignments, copy_course_files, nbgrader_config, use_this_environment
from attncourse.grading.model import Hold, HoldKind, Status
from attncourse.grading.records import Record, class_outcomes, hold, not_collected, write_record
from attncourse.grading.release import student_version as release

ROOT = Path(__file__).resolve().parent.parent
UNITS = assignments(ROOT)

os.environ.setdefault("ATTN_COURSE_DEVICE", "cpu")  # CI has no GPU; on a GPU machine unset it to test CUDA
use_this_environment()


def _missing(marker):
    if marker == "needs_root":
        from attncourse.grading.isolation.sandbox import Sandbox
        problem = Sandbox().problem()
        return f"no grading sandbox here: {problem}" if problem else ""
    if marker == "needs_browser":
        from attncourse.browser import find_chromium
        return "" if find_chromium() else "Chromium is not installed (scripts/setup.sh installs it as root)"
    return ""


# pytest-xdist runs each test file in one worker (`--dist loadfile`: its module fixtures are built once), the
# files that take minutes first (CI's `--durations` log), so that the workers end together.
LONGEST_FIRST = ("test_hostile.py", "test_catalog.py", "test_honest_class.py", "test_pipeline.py", "test_cluster.py",
                 "test_semester.py", "test_outcomes.py", "test_postgres.py", "test_notebooks.py", "test_slide_fit.py", "test_slides.py",
                 "test_ta_screens.py", "test_student_screens.py", "test_witness.py")


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: a worker per core, at most 4 (each worker's grading starts kernels of its own)."""
    return max(1, min(len(os.sched_getaffinity(0)), 4))


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    reasons = {}
    for item in items:
        for marker in ("needs_root", "needs_browser"):
            if item.get_closest_marker(marker):
                if marker not in reasons:
                    reasons[marker] = _missing(marker)
                if reasons[marker]:
                    item.add_marker(pytest.mark.skip(reason=reasons[marker]))


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if os.environ.get("ATTN_COURSE_NO_SKIPS") and skipped and exitstatus == 0:
        print(f"\nATTN_COURSE_NO_SKIPS: {skipped} tests were skipped; CI must run every test")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def course(root, *args, check=True, env=None, timeout=1800):
    """Run a `course` command on the course at `root` (from elsewhere, as an instructor may); with `check`, it
    must succeed."""
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "attncourse.cli", "--root", str(root), *args], cwd="/",
                         capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert run.returncode == 0, f"course {' '.join(args)}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


def zip_bytes(entries):
    """A zip file's bytes holding (name, data) entries."""
    import io
    import zipfile
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in entries:
            z.writestr(name, data)
    return buffer.getvalue()


def copy_course(dest):
    """A scratch course with the repo's content and no grading state (the npm assets of setup.sh linked)."""
    dest = copy_course_files(ROOT, dest, (*AUTHORED, "release"))
    (dest / "build").mkdir()
    (dest / "build" / "vendor").symlink_to(ROOT / "build" / "vendor")
    return dest


@pytest.fixture(scope="session")
def assignment_ids():
    return UNITS


@pytest.fixture(scope="session")
def catalog_course(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("catalog_course"))
    release.release_all(nbgrader_config(root), root, UNITS)
    return root


_GRADED = {}
DECK_ONLY = "deck_only"  # a student who copies the deck's code and answers nothing else


@pytest.fixture
def catalog_grades(catalog_course, unit):
    """One unit's catalog graded through the course's grading path (sandboxed where possible), once per
    session: the reference answer, the lecturer's code, the other correct answers, each buggy variant and
    `DECK_ONLY`, the deck's code alone, and the misconceptions' twins. Returns {"root": the course, "cases": {student: Outcome},
    "variants": [...], "tests": [...], "hidden": [...], "correct": [...], "misconceptions": {...}}."""
    if unit not in _GRADED:
        root, submitted = catalog_course, catalog_course / "submitted" / unit
        catalog = load_catalog(root, unit)
        src = source_notebook(root, unit, catalog)
        cases = {**catalog_cases(root, unit), DECK_ONLY: (deck_only(root, unit), None)}
        pairs = []
        for student, (nb, _) in cases.items():
            folder = submitted / student / unit
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{catalog.NOTEBOOK}.ipynb")
            pairs.append((unit, student))
        # grading waits on kernels more than it computes: twice the cores grades a catalog about 20% faster
        # (a2 on 2 cores: 114 s with 2 jobs, 92 s with 4), with the same outcomes; pytest-xdist's workers share them
        jobs = max(2, 2 * len(os.sched_getaffinity(0)) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
        outcomes = commands.grade_submissions(nbgrader_config(root, submitted), pairs, jobs=jobs, warn=lambda line: None)
        _GRADED[unit] = {
            "root": root, "variants": [v for v in catalog.VARIANTS if f"bug_{v['id']}" in cases], "tests": test_cell_ids(src),
            "hidden": [grade_id(c) for c in src.cells if has_hidden_tests(c)],
            "correct": [k for k, (_, lost) in cases.items() if lost == set() and not k.startswith("bug_")],
            "misconceptions": getattr(catalog, "MISCONCEPTIONS", {}),
            "cases": {o.student: o for o in outcomes}}
    return _GRADED[unit]


def auto_points(unit) -> float:
    """The autograded points of a unit (its test cells), so that a clean answer's score is never pasted."""
    src = nbformat.read(ROOT / "source" / unit / f"{load_catalog(ROOT, unit).NOTEBOOK}.ipynb", as_version=4)
    return sum(float(c.metadata["nbgrader"]["points"]) for c in src.cells if is_test_cell(c))


def lost_points(outcome, tests):
    """Test cells (among `tests`) where the outcome scored below the maximum."""
    return {cell for cell in tests if outcome.cells[cell][0] < outcome.cells[cell][1]}


def failure_messages(root, assignment, student, cells):
    """For an assertion message: what the autograded notebook says in each of the test cells `cells`, so that a
    failure seen only on another machine (CI) tells its reason."""
    found = {}
    for path in sorted((Path(root) / "autograded" / student / assignment).glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if grade_id(cell) in cells:
                found[grade_id(cell)] = " | ".join(str(o.get("evalue") or o.get("text", ""))[:600]
                                                   for o in cell.get("outputs", []))
    return "\n".join(f"  {cell}: {found.get(cell, '(no such cell in the autograded notebook)')}"
                     for cell in sorted(cells))


@pytest.fixture(scope="session")
def executed_decks():
    """Every deck executed once, top to bottom, on CPU: {path: (executed notebook, seconds)}. Two at a time, each
    in its own kernel: a deck's kernel waits on its plots and prints as much as it computes."""
    from concurrent.futures import ThreadPoolExecutor

    from attncourse import slides
    decks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(decks, pool.map(slides.execute, decks), strict=True))


def _postgres_bin(name):
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found[-1]:
        pytest.skip(f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)")
    return found[-1]


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL server on a Unix socket; yields the SQLAlchemy URL of an empty database."""
    folder = tempfile.mkdtemp(prefix="attncourse-pg-")  # under /tmp: the server's user must reach it
    data = os.path.join(folder, "data")
    as_server = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses to run as root
    if as_server:
        shutil.chown(folder, "postgres")
    run = lambda *args: subprocess.run([*as_server, *args], check=True, capture_output=True, text=True)  # noqa: E731
    run(_postgres_bin("initdb"), "-D", data, "-U", "course", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8")
    run(_postgres_bin("pg_ctl"), "-D", data, "-l", os.path.join(folder, "log"), "-w",
        "-o", f"-k {folder} -c listen_addresses=''", "start")
    try:
        run(_postgres_bin("createdb"), "-h", folder, "-U", "course", "gradebook")
        yield f"postgresql+psycopg://course@/gradebook?host={folder}"
    finally:
        run(_postgres_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


# --- a small course built in the test: one released assignment, a gradebook, no kernel ---------------------

HIDDEN_LINE = "assert double(21) == 42, '二十一的两倍不对'"


def _meta(**kw):
    return {"nbgrader": {"schema_version": 3, "locked": False, "solution": False, "grade": False, **kw}}


def small_source_notebook():
    return new_notebook(cells=[
        new_code_cell("import math", metadata=_meta(grade_id="imports", locked=True)),
        new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                      metadata=_meta(grade_id="double", solution=True)),
        new_code_cell('"""double 把输入乘以 2"""\nassert double(1) == 2\n### BEGIN HIDDEN TESTS\n'
                      f"{HIDDEN_LINE}\n### END HIDDEN TESTS",
                      metadata=_meta(grade_id="test_double", grade=True, locked=True, points=5)),
        new_markdown_cell("为什么？\n\n=== BEGIN MARK SCHEME ===\n因为。\n=== END MARK SCHEME ===",
                          metadata=_meta(grade_id="why", grade=True, solution=True, points=2))],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


STUDENTS = {"2023000001": ("张", "三", True), "2023000002": ("欧阳", "娜娜", False), "2023000003": ("李", "四", True)}
SOCKET = Hold(HoldKind.UNSANDBOXED, "导入了 socket 模块", "单元格 #2", 1, 1)


def small_course(root):
    """Assignment `a` released in `root`; three students graded (full marks, a failed test, one held for review),
    one whose grading failed, one on the roster who handed in nothing and one whose upload was not collected."""
    for name in ("nbgrader_config.py", "course.toml"):
        shutil.copy(ROOT / name, root / name)
    (root / "build").mkdir()
    (root / "build" / "vendor").symlink_to(ROOT / "build" / "vendor")
    (root / "source" / "a").mkdir(parents=True)
    nbformat.write(small_source_notebook(), root / "source" / "a" / "work.ipynb")
    cfg = nbgrader_config(root)
    release.release(cfg, root, "a", say=lambda _: None)
    released = nbformat.read(root / "release" / "a" / "work.ipynb", as_version=4)
    db = cfg.CourseDirectory.db_url
    with Gradebook(db) as gb:
        for sid, (last, first, passed) in STUDENTS.items():
            gb.update_or_create_student(sid, last_name=last, first_name=first)
            gb.add_submission("a", sid)
            test = gb.find_grade("test_double", "work", "a", sid)
            test.auto_score, test.needs_manual_grade = (5 if passed else 0), False
            gb.find_grade("why", "work", "a", sid).needs_manual_grade = True
        gb.db.commit()
    for sid, (_, _, passed) in STUDENTS.items():
        nb = nbformat.from_dict(released)
        nb.cells[1].source = "def double(x):\n    return x + x" if passed else "def double(x):\n    return x"
        if not passed:
            nb.cells[2].outputs = [new_output("error", ename="AssertionError", evalue="double(1) 应为 2",
                                              traceback=[])]
        nb.cells[3].source = "<b>因为</b>要加倍。<script>alert(1)</script>"
        (root / "autograded" / sid / "a").mkdir(parents=True)
        nbformat.write(nb, root / "autograded" / sid / "a" / "work.ipynb")
        held = hold(db, "a", sid, None) if sid == "2023000003" else {}
        write_record(root, "a", sid, Record(Status.GRADED, holds=[SOCKET] if held else [], held=held))
    write_record(root, "a", "2023000004", Record(Status.FAILED, reason="内核崩溃"))
    not_collected(root, "a", "2023000006", "上传的是 作业.pdf（不是 notebook）", [])
    with Gradebook(db) as gb:
        gb.update_or_create_student("2023000005", last_name="王", first_name="五")  # on the roster, no upload
        outcomes = class_outcomes(gb, root, ["a"], [])
    return root, cfg, outcomes
