"""`course grade --cluster`: a class graded on a real Dask cluster on this machine (`dask scheduler` and two
`dask worker` processes, started as an instructor would start them) into a PostgreSQL gradebook gets exactly the
grades, holds, notes, diagnoses and TA view (the autograded notebook formgrader shows: which run each cell shows,
the hold banner) of local grading into SQLite. One worker is killed while it executes a submission, which is graded again on the
other and recorded once; then the scheduler is killed: `course grade` stops with a clear message and keeps what
was graded, and the next run, on a new cluster, grades only what is missing.
"""
import gc
import os
import signal
import subprocess
import sys
import time

import nbformat
import pytest
from distributed import Client
from nbgrader.api import Gradebook

from attncourse.grading.authoring.local_cluster import LocalCluster
from attncourse.grading.authoring.variants import catalog_cases
from attncourse.grading.cells import is_answer_cell
from attncourse.grading.course import folders, nbgrader_config
from attncourse.grading.records import read_record, records_dir
from attncourse.grading.run import certificates

from conftest import ROOT, copy_course, course

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

UNIT = "a1_scoring"
STUDENTS = 8


def _class(root):
    """8 students: correct answers, catalogued mistakes (some named by diagnosis) and a hold for review."""
    cases = catalog_cases(root, UNIT)
    picked = [k for k in cases if not k.startswith(("bug_", "twin_"))][:3] + \
        [k for k in cases if k.startswith("twin_")][:2] + [k for k in cases if k.startswith("bug_")][:2]
    assert len(picked) == STUDENTS - 1, picked
    name = next((root / "release" / UNIT).glob("*.ipynb")).name
    students = {}
    for i, case in enumerate(picked):
        students[f"s{i:02d}_{case}"[:40]] = cases[case][0]
    held = nbformat.reads(nbformat.writes(cases[picked[0]][0]), as_version=4)
    first = next(c for c in held.cells if is_answer_cell(c) and c.cell_type == "code")
    first.source = "import ctypes  # 评分程序要人看一眼的写法\n" + first.source
    students["s99_held"] = held
    return students, name


def _write_class(root, students, name):
    for student, nb in students.items():
        folder = root / "submitted" / student / UNIT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / name)


def _ta_view(root, student):
    """What the TA reads of each cell of the autograded notebook: its source and the labels of the runs it shows
    (the grader's numbers may differ in the last digit with the number of threads, the labels may not)."""
    paths = sorted(folders(root).autograded(student, UNIT).glob("*.ipynb"))
    assert paths, f"{student} has no autograded notebook"
    return [[(c.cell_type, c.source, [o.get("text", "") for o in c.get("outputs", []) if o.get("text", "").startswith("——")])
             for c in nbformat.read(p, as_version=4).cells] for p in paths]


def _graded(root):
    """{student: (record without timings, {cell: (auto score, needs manual grade)}, TA view)} of every recorded
    student."""
    found = {}
    with Gradebook(nbgrader_config(root).CourseDirectory.db_url) as gb:
        for path in sorted((records_dir(root) / UNIT).glob("*.json")):
            student = path.stem
            record = read_record(root, UNIT, student)
            cells = {g.cell.name: (g.auto_score, g.needs_manual_grade)
                     for nb in gb.find_submission(UNIT, student).notebooks for g in nb.grades}
            found[student] = (record, cells, _ta_view(root, student))
    return found


def _grade_in_background(root, address):
    return subprocess.Popen([sys.executable, "-m", "attncourse.cli", "--root", str(root), "grade", UNIT,
                             "--cluster", address], cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _wait(condition, what, timeout=300):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_class_graded_on_a_dask_cluster_matches_local_grading_and_survives_failures(tmp_path, postgres):
    local = copy_course(tmp_path / "local")
    course(local, "release", UNIT)
    students, name = _class(local)
    _write_class(local, students, name)
    course(local, "grade", UNIT, "--jobs", "2")
    expected = _graded(local)
    assert len(expected) == STUDENTS
    assert any(record.diagnoses for record, _, _ in expected.values()), "no diagnosis in the class"
    assert any(labels for _, _, views in expected.values() for view in views for _, _, labels in view), \
        "the TA view labels no run"
    assert expected["s99_held"][0].flags and expected["s99_held"][0].held

    remote = copy_course(tmp_path / "cluster")
    with open(remote / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.CourseDirectory.db_url = {postgres!r}\n")
    assert nbgrader_config(remote).CourseDirectory.db_url == postgres
    course(remote, "release", UNIT)
    _write_class(remote, students, name)

    # 1. two workers; one is killed while it executes a submission; then the scheduler goes away
    cluster = LocalCluster(workers=2)
    try:
        pids = cluster.worker_pids()
        grading = _grade_in_background(remote, cluster.address)
        busy = {}
        _wait(lambda: busy.update({w: k for w, k in cluster.client.processing().items() if k}) or busy
              or grading.poll() is not None, "a submission on a worker")
        assert busy, grading.communicate()[0][-3000:]
        victim, keys = next(iter(busy.items()))
        student = next(s for s in students if f"-{s}-" in keys[0])
        os.kill(pids[victim], signal.SIGKILL)
        _wait(lambda: read_record(remote, UNIT, student) is not None or grading.poll() is not None,
              "the killed worker's submission to be graded again")
        assert read_record(remote, UNIT, student) is not None, grading.communicate()[0][-3000:]
        cluster.scheduler.kill()
        out = grading.communicate(timeout=120)[0]
    finally:
        cluster.close()
    assert grading.returncode != 0, out[-3000:]
    assert "评分已停止" in out and "course grade" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    first = _graded(remote)
    assert student in first and 0 < len(first) < STUDENTS, (sorted(first), out[-3000:])
    for graded, found in first.items():
        assert found == expected[graded], graded

    # 2. a new cluster, as the README sets it up (TLS, mutual authentication, the course's certificates): only
    # what is missing is graded; the class now matches local grading exactly
    certs = remote / "certs"
    course(remote, "cluster-certs", str(certs))
    with open(remote / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.Cluster.certificates = {str(certs)!r}\n")
    cluster = LocalCluster(workers=2, certificates=certs)
    try:
        run = course(remote, "grade", UNIT, "--cluster", cluster.address)
    finally:
        cluster.close()
    assert cluster.address.startswith("tls://") and f"自动评分 {STUDENTS} 份提交（Dask 集群" in run.stdout
    assert sum(f" {UNIT}" in line and " ＝ " in line for line in run.stdout.splitlines()) == len(first), run.stdout[-3000:]
    assert _graded(remote) == expected


def test_only_the_courses_own_parties_reach_the_cluster(tmp_path):
    """A scheduler started with the course's certificates (`course cluster-certs`) refuses a client without a
    certificate, over TLS or plain TCP, and one with a certificate of another authority; a worker without the
    course's certificate, or with another's, never joins: nobody else can submit work, read tasks or send results."""
    for name in ("certs", "other"):
        course(ROOT, "cluster-certs", str(tmp_path / name), "--host", "127.0.0.1")  # writes only there
    assert (tmp_path / "certs" / "client.key").stat().st_mode & 0o077 == 0
    with LocalCluster(workers=1, certificates=tmp_path / "certs") as cluster:
        assert cluster.address.startswith("tls://127.0.0.1:")
        assert list(cluster.client.scheduler_info()["workers"])  # the course's own worker joined
        for address, security in ((cluster.address, None), (cluster.address.replace("tls://", "tcp://"), None),
                                  (cluster.address, certificates.security(tmp_path / "other"))):
            # the client refused before is finalized here, not by a collection in the next client's new IO-loop
            # thread while `Client` holds distributed's LoopRunner lock (its start then gave up after 10 s)
            gc.collect()
            with pytest.raises((OSError, TimeoutError, TypeError)):
                Client(address, timeout=5, set_as_default=False, security=security)
        rogues = [cluster.start_worker("rogue"),
                  cluster.start_worker("rogue-other", options=certificates.command_line(tmp_path / "other", "worker"))]
        try:
            time.sleep(10)  # long enough for a worker to join (the course's own joined above in less)
            assert [w["name"] for w in cluster.client.scheduler_info()["workers"].values()] == ["w0"]
        finally:
            for rogue in rogues:
                rogue.kill()
                rogue.wait()
