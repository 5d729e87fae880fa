"""A local run executes its submissions in executor processes of its own (run/executors.py): not in the grader,
with uids no other executor takes and the test cells' forbidden names read before they fork, and an executor that
dies fails only the submission it ran."""
import os
import shutil

import nbformat
import pytest

from attncourse.grading import commands
from attncourse.grading.course import nbgrader_config
from attncourse.grading.isolation.sandbox import BLOCK, UidBlock
from attncourse.grading.model import Status
from attncourse.grading.protocol import remote
from attncourse.grading.release import student_version as release
from attncourse.grading.run import execution, tasks

from conftest import ROOT, small_source_notebook


def test_the_executors_shares_of_a_runs_uids_never_meet():
    block = UidBlock(3_000_000)
    try:
        block.share(0, 2)
        first = [block.take() for _ in range(BLOCK // 2)]
        block.share(1, 2)
        second = [block.take() for _ in range(BLOCK // 2)]
    finally:
        block.close()
    assert len(first) == len(second) == BLOCK // 2
    assert not set(first) & set(second), "two executors never give one uid to two kernels"
    assert {u - block.first for u in first} == set(range(0, BLOCK, 2))
    with pytest.raises(RuntimeError, match="in use"):
        block.take()  # share 1's uids are all in use: never one of share 0's


@pytest.mark.slow
def test_a_local_run_executes_in_its_executors_and_one_that_dies_fails_only_its_submission(tmp_path, monkeypatch):
    root = tmp_path / "course"
    (root / "source" / "a").mkdir(parents=True)
    for name in ("nbgrader_config.py", "course.toml"):
        shutil.copy(ROOT / name, root / name)
    nbformat.write(small_source_notebook(), root / "source" / "a" / "work.ipynb")
    release.release(nbgrader_config(root), root, "a", say=lambda _: None)
    released = nbformat.read(root / "release" / "a" / "work.ipynb", as_version=4)
    students = {"s1": "2 * x", "s2": "x", "dies": "2 * x", "s3": "x + x", "s4": "2 * x"}
    for sid, body in students.items():
        nb = nbformat.from_dict(released)
        nb.cells[1].source = f"def double(x):\n    return {body}"
        (root / "submitted" / sid / "a").mkdir(parents=True)
        nbformat.write(nb, root / "submitted" / sid / "a" / "work.ipynb")
    pids = tmp_path / "pids"
    pids.mkdir()
    execute_here = tasks.execute_here

    def recorded(task, folder, sandboxed):  # in the executor: forked after this patch
        hits = remote.forbidden_names.cache_info().hits
        tests = [task["instructor"]["sources"][name] for name in task["instructor"]["tests"]]
        for source in tests:
            remote.forbidden_names(source)
        read = remote.forbidden_names.cache_info().hits - hits == len(tests) > 0
        (pids / os.path.basename(os.path.dirname(folder))).write_text(f"{os.getpid()} {read}")
        if "/dies/" in folder:
            os._exit(1)
        return execute_here(task, folder, sandboxed)

    monkeypatch.setattr(tasks, "execute_here", recorded)
    read_instructors = []
    from_gradebook = execution.Instructor.from_gradebook.__func__
    monkeypatch.setattr(execution.Instructor, "from_gradebook", classmethod(
        lambda cls, *key: read_instructors.append(key) or from_gradebook(cls, *key)))
    outcomes = {o.student: o for o in commands.grade_submissions(
        nbgrader_config(root), [("a", s) for s in students], jobs=2, warn=lambda _: None)}
    assert len(read_instructors) == 1, f"the notebook's instructor cells are read once per run: {read_instructors}"

    ran = {p.name: int(p.read_text().split()[0]) for p in pids.iterdir()}
    assert set(ran) == set(students) and os.getpid() not in ran.values(), "every execution is an executor's"
    assert all(p.read_text().endswith(" True") for p in pids.iterdir()), \
        "the grader read the test cells' forbidden names before it forked its executors"
    assert len(set(ran.values())) == 2, "two jobs: two executors"
    assert outcomes["dies"].status == Status.FAILED and "评分失败" in outcomes["dies"].reason
    for sid in ("s1", "s3", "s4"):
        assert outcomes[sid].status == Status.GRADED and outcomes[sid].cells["test_double"][0] == 5, sid
    assert outcomes["s2"].status == Status.GRADED and outcomes["s2"].cells["test_double"][0] == 0
