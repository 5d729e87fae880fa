"""The run stage's decisions, in seconds: what `grade_one` keeps, fails, holds or gives up on, with nbgrader's
converter replaced by a fake that writes what a real run writes (the gradebook's grades, the autograded
notebook, the execute step's `SubmissionResult`); and the execute step against a fake kernel: a cell's output
capped, an interrupt answered or not, a kernel that dies, messages it cannot read. The real converter is the
end-to-end tests'; two `slow` tests at the end run the execute step with real kernels (no sandbox), where student
code writes to its kernel's sockets (about 30 s)."""
import asyncio
import gc
import queue
import threading
import time
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient.exceptions import CellExecutionComplete, DeadKernelError
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute

from attncourse.grading.cells import grade_id
from attncourse.grading.intake.staging import Intake
from attncourse.grading.model import Hold, HoldKind, Status, SubmissionResult
from attncourse.grading.protocol import remote, trusted
from attncourse.grading.records import read_record
from attncourse.grading.run import autograde, diagnosis, execution
from attncourse.grading.run.execution import CRASHED, CourseExecute, Instructor, SubmissionFailed, hung

from conftest import small_course

STUDENTS = iter(range(2023000100, 2023000200))


class FakeAutograde:
    """Stands for CourseAutograde: `behaviour` says what the run does."""
    behaviour, runs = "pass", 0

    def __init__(self, result, workers, coursedir, config):
        self.result, self.coursedir = result, coursedir

    def start(self):
        FakeAutograde.runs += 1
        a, s = self.coursedir.assignment_id, self.coursedir.student_id
        if self.behaviour == "crash":
            self.result.failure = "内核崩溃：测试用的原因"
            raise RuntimeError("the kernel died")
        with Gradebook(self.coursedir.db_url) as gb:
            gb.update_or_create_student(s)
            gb.update_or_create_submission(a, s)
            gb.find_grade("test_double", "work", a, s).auto_score = 5.0
            gb.find_grade("test_double", "work", a, s).needs_manual_grade = False
            gb.find_grade("why", "work", a, s).needs_manual_grade = True
            gb.db.commit()
        if self.behaviour == "hold":
            self.result.holds.append(Hold(HoldKind.INTROSPECTION, "导入了 ctypes 模块", "单元格 #2", 1, 1))
            self.result.held.add("test_double")
        out = Path(self.coursedir.format_path(self.coursedir.autograded_directory, s, a))
        out.mkdir(parents=True, exist_ok=True)
        release = Path(self.coursedir.format_path(self.coursedir.release_directory, ".", a))
        nbformat.write(nbformat.read(release / "work.ipynb", as_version=4), out / "work.ipynb")


class LostWorkers:
    lost = True

    def lost_error(self):
        return ConnectionError("the cluster is gone")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root, cfg, _ = small_course(tmp_path_factory.mktemp("run"))
    return root, autograde.grading_config(cfg)


@pytest.fixture
def course(small, tmp_path, monkeypatch):
    """The small course, a student of its own staged for assignment `a`, and the fake converter."""
    root, cfg = small
    sid = str(next(STUDENTS))
    monkeypatch.setattr(autograde, "CourseAutograde", FakeAutograde)
    FakeAutograde.behaviour, FakeAutograde.runs = "pass", 0
    staged = tmp_path / "staged" / sid / "a"
    staged.mkdir(parents=True)
    (staged / "work.ipynb").write_text((root / "release" / "a" / "work.ipynb").read_text(encoding="utf-8"))
    return root, cfg, Intake("a", sid, staged, digest="d1"), tmp_path / "scratch"


def test_a_graded_submission_is_kept_with_its_record(course):
    root, cfg, intake, scratch = course
    sid = intake.student
    graded = autograde.grade_one(cfg, root, intake, scratch)
    assert (graded.status, graded.score, graded.max_score, graded.pending, graded.withheld) == (
        Status.GRADED, 5, 7, 2, 0)
    assert (root / "autograded" / sid / "a" / "work.ipynb").is_file()
    assert read_record(root, "a", sid).status == Status.GRADED and read_record(root, "a", sid).digest == "d1"
    again = autograde.grade_one(cfg, root, intake, scratch)
    assert again.status == Status.GRADED and again.kept and again.score == 5 and FakeAutograde.runs == 1
    assert autograde.grade_one(cfg, root, intake, scratch, force=True).status == Status.GRADED
    assert FakeAutograde.runs == 2


def test_a_run_executes_as_many_submissions_at_once_as_it_has_jobs_while_another_keeps_its_books(course, monkeypatch,
                                                                                                 tmp_path):
    root, cfg, intake, scratch = course
    counts, most, lock = Counter(), Counter(), threading.Lock()
    start = FakeAutograde.start

    def count(key, step):
        with lock:
            counts[key] += step
            most[key] = max(most[key], counts[key])

    def executing(self):  # as CourseExecute.preprocess: the books lent out, the execution in one of the run's slots
        with execution.TURN.lent():
            count("ready", 1)
            with execution.EXECUTING.taken():
                count("executing", 1)
                time.sleep(0.05)
                count("executing", -1)
            count("ready", -1)
        start(self)

    monkeypatch.setattr(FakeAutograde, "start", executing)
    intakes = [intake]
    for _ in range(3):
        sid = str(next(STUDENTS))
        staged = tmp_path / "staged" / sid / "a"
        staged.mkdir(parents=True)
        (staged / "work.ipynb").write_bytes((intake.folder / "work.ipynb").read_bytes())
        intakes.append(Intake("a", sid, staged, digest="d1"))
    threads, saved, thresholds = [], torch.get_num_threads(), gc.get_threshold()
    torch.set_num_threads(2)
    try:
        outcomes = autograde.grade_class(
            cfg, intakes, jobs=1, preload=False,
            progress=lambda *_: threads.append((torch.get_num_threads(), gc.get_threshold())))
        assert torch.get_num_threads() == 2, "the run gives torch's threads back"
        assert gc.get_threshold() == thresholds, "the run gives the garbage collector's thresholds back"
    finally:
        torch.set_num_threads(saved)
    assert [n for n, _ in threads] == [1] * 4, "the grader's own torch operators run on one thread each during the run"
    assert {t for _, t in threads} == {autograde.GC_THRESHOLD} != {thresholds}, "fewer collections during the run"
    assert [o.status for o in outcomes] == [Status.GRADED] * 4 and FakeAutograde.runs == 4
    assert most["executing"] == 1, "one job: one submission executes at a time"
    assert most["ready"] == 2, "meanwhile another submission's books are kept, and it waits for the slot"


def test_a_submission_that_cannot_run_fails_with_its_reason_and_no_score(course):
    root, cfg, intake, scratch = course
    sid = intake.student
    FakeAutograde.behaviour = "crash"
    failed = autograde.grade_one(cfg, root, intake, scratch)
    assert failed.status == Status.FAILED and failed.score is None and failed.reason == "内核崩溃：测试用的原因"
    assert not (root / "autograded" / sid).exists()
    assert read_record(root, "a", sid).reason == failed.reason
    again = autograde.grade_one(cfg, root, intake, scratch)  # unchanged: not run again, still failed
    assert again.status == Status.FAILED and again.reason == failed.reason and FakeAutograde.runs == 1


def test_a_refused_intake_fails_without_running(course):
    root, cfg, intake, scratch = course
    intake.reason = "提交中含符号链接或特殊文件（x），拒绝评分"
    failed = autograde.grade_one(cfg, root, intake, scratch)
    assert failed.status == Status.FAILED and failed.reason == intake.reason and FakeAutograde.runs == 0


def test_a_flagged_submission_is_held_where_formgrader_shows_it(course):
    root, cfg, intake, scratch = course
    sid = intake.student
    FakeAutograde.behaviour = "hold"
    held = autograde.grade_one(cfg, root, intake, scratch)
    assert (held.status, held.score, held.withheld, held.flags) == (Status.HELD, 0, 5, ["单元格 #2：导入了 ctypes 模块"])
    assert read_record(root, "a", sid).held == {"test_double": 5.0}
    with Gradebook(cfg.CourseDirectory.db_url) as gb:
        notebook = gb.find_submission_notebook("work", "a", sid)
        grade = gb.find_grade("test_double", "work", "a", sid)
        assert notebook.flagged and grade.needs_manual_grade and grade.auto_score == 0 and grade.manual_score is None


def test_a_lost_cluster_records_nothing(course):
    root, cfg, intake, scratch = course
    sid = intake.student
    with pytest.raises(ConnectionError):
        autograde.grade_one(cfg, root, intake, scratch, workers=LostWorkers())
    assert read_record(root, "a", sid) is None and FakeAutograde.runs == 0


# --- the execute step against a fake kernel client: its messages, an unanswered interrupt, a dead kernel -------

class FakeChannel:
    def __init__(self, answers):
        self.answers = answers

    async def get_msg(self, timeout=None):
        if not self.answers:
            raise queue.Empty
        return self.answers.pop(0)


class FakeKernel:
    """What CourseExecute reads of a kernel manager and client after an interrupt."""

    def __init__(self, answers=()):
        self.interrupted = 0
        self.shell_channel = FakeChannel(list(answers))

    async def interrupt_kernel(self):
        self.interrupted += 1


class FakeProbe:
    """The probe's socket (remote.Channel): answered between cells only."""

    def __init__(self, between_cells):
        self.between_cells = between_cells

    def request(self, request, timeout):
        if not self.between_cells:
            raise remote.KernelLost("ignored the interrupt")
        return {"ok": {}}


def _execute(**config):
    step = CourseExecute(**config)
    step.reset_execution_trackers()  # what nbclient sets up before a notebook runs, and before a cell runs:
    step.clear_before_next_output = False
    step.result = SubmissionResult()
    step._unread = Counter()
    return step


def _stream(text):
    return {"msg_type": "stream", "header": {"msg_type": "stream"}, "parent_header": {},
            "content": {"name": "stdout", "text": text}}


def test_a_cells_output_is_capped_with_one_note():
    step = _execute(max_output_bytes=1000)
    step._kept_bytes, outs = {}, []
    for _ in range(50):
        step.output(outs, _stream("x" * 100), None, 0)
    kept = "".join(o.get("text", "") for o in outs)
    assert kept.count("输出过多") == 1 and kept.count("x") <= 1000 and len(outs) < 50


def _error(evalue):
    return {"msg_type": "error", "header": {"msg_type": "error"}, "parent_header": {},
            "content": {"ename": "ValueError", "evalue": evalue, "traceback": ["Traceback", f"ValueError: {evalue}"]}}


def test_a_cells_error_is_kept_cut_and_raised_again_and_again_is_dropped():
    """An exception whose message is megabytes: the cell keeps one error (the cell failed), cut to the cell's cap,
    whether it came as output or only in the cell's reply (nbgrader then adds the reply's error itself)."""
    step = _execute(max_output_bytes=1000)
    step._kept_bytes, outs = {}, []
    for _ in range(20):
        step.output(outs, _error("长" * 1_000_000), None, 0)
    assert [o.output_type for o in outs] == ["error"] and outs[0].ename == "ValueError"
    assert len(str(outs[0])) < 3000 and "其余" in outs[0].evalue
    cell = nbformat.v4.new_code_cell("raise ValueError")
    step.on_cell_executed(cell=cell, execute_reply={"content": {"status": "error", **_error("长" * 1_000_000)["content"]}})
    assert [o.output_type for o in cell.outputs] == ["error"] and len(str(cell.outputs[0])) < 3000


def test_the_notebooks_output_is_capped_across_its_cells():
    step = _execute(max_output_bytes=1000, max_notebook_output_bytes=3000)
    step._kept_bytes, cells = {}, [[] for _ in range(10)]
    for index, outs in enumerate(cells):
        step.output(outs, _stream("x" * 800), None, index)
    kept = "".join(o.get("text", "") for outs in cells for o in outs)
    assert kept.count("x") <= 3000 and kept.count("输出过多") == 10 - kept.count("x") // 800


def test_a_kernel_that_ignores_the_interrupt_fails_the_submission_as_hung():
    step = _execute(timeout=30, interrupt_grace=0)
    step.km = step.kc = FakeKernel()
    step.channel = FakeProbe(between_cells=False)
    with pytest.raises(SubmissionFailed):
        asyncio.run(step._async_handle_timeout(30))
    assert step.km.interrupted == 1 and step.result.failure == hung(30)


def test_a_kernel_that_answers_the_interrupt_goes_on():
    step = _execute(timeout=30, interrupt_grace=0)
    step.km = step.kc = FakeKernel(answers=[{"content": {"status": "error"}}])
    asyncio.run(step._async_handle_timeout(30))
    assert step.km.interrupted == 1 and step.result.failure == ""


def test_a_cell_whose_reply_was_lost_is_counted_and_grading_goes_on():
    """Student code wrote to the kernel's shell socket and the cell's reply was dropped: no reply to the interrupt,
    but the kernel serves the probe, which it does only between cells. The cell is counted, not failed as hung."""
    step = _execute(timeout=30, interrupt_grace=0)
    step.km = step.kc = FakeKernel()
    step.channel = FakeProbe(between_cells=True)
    asyncio.run(step._async_handle_timeout(30))
    assert step.km.interrupted == 1 and step.result.failure == "" and step._unread == {"shell": 1}


def _signed(msg_type, content):
    """A message as the kernel's session signs it, whose content student code chose."""
    return {"msg_type": msg_type, "header": {"msg_type": msg_type}, "parent_header": {}, "content": content}


def test_what_nbclient_cannot_read_is_counted_against_the_running_cell_and_holds(monkeypatch):
    """Signed with the kernel's key (student code has it) but not readable: a stream without its name, a status
    without its state, a reply without a status. Each is counted, the cell is named in a note that holds the
    submission, and the cell's end still ends it."""
    step = _execute()
    step.instructor = Instructor({"double": "", "test_double": ""}, ["test_double"], [])
    step.session, step.kc = remote.Session(send=None), None
    cell = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": "double"}})

    def runs(self, cell, resources, index):
        cell.metadata["execution"] = {}  # as nbclient sets it before a cell runs
        for msg in (_signed("stream", {"text": 1}), _signed("status", {}), _signed("clear_output", [])):
            assert self.process_message(msg, cell, index) is None
        with pytest.raises(CellExecutionComplete):
            self.process_message(_signed("status", {"execution_state": "idle"}), cell, index)
        self.on_cell_executed(cell=cell, cell_index=index, execute_reply={"content": {"no": "status"}})
        return cell, resources

    monkeypatch.setattr(Execute, "preprocess_cell", runs, raising=False)
    step.preprocess_cell(cell, {}, 2)
    assert [o.output_type for o in cell.outputs] == ["error"]
    assert step.session.tampered == ["单元格 double：内核的消息无法读取或缺失（格式错误、未签名或签名无效，IOPub 通道 3 条、"
                                     "shell 通道 1 条），已丢弃"]
    monkeypatch.setattr(Execute, "preprocess_cell", lambda self, cell, resources, index: (cell, resources), raising=False)
    step.preprocess_cell(nbformat.v4.new_code_cell("y = 2"), {}, 3)  # the next cell sends only what it can read
    assert len(step.session.tampered) == 1


def test_a_dead_kernel_fails_the_submission_as_crashed(monkeypatch):
    def dies(self, nb, resources, km=None):
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(Execute, "preprocess", dies)
    step = _execute()
    step._send = None
    with pytest.raises(SubmissionFailed):
        step.run(nbformat.v4.new_notebook(), {}, Instructor({}, [], []), step.result)
    assert step.result.failure == CRASHED


def test_a_test_cells_time_starts_when_it_runs_not_while_it_waits_for_a_diagnosis(monkeypatch):
    """A diagnosis run has torch's generator alone and other students' test cells wait for it: the wait is not
    the student's time (a cell timed out by it loses its points, as two honest answers once did in CI)."""
    step = _execute(timeout=2)
    step.instructor, step.namespace, step.session, step.failed = Instructor({"test_a": "pass"}, ["test_a"], []), {}, None, {}
    budget = []

    def test_cell(source, gid, namespace, session):
        budget.append(step._deadline - time.monotonic())
        return trusted.Verdict(True)

    monkeypatch.setattr(execution.trusted, "run_test_cell", test_cell)
    running = threading.Event()

    def diagnosis_run():
        with diagnosis.RANDOM.alone():
            running.set()
            time.sleep(1.5)

    other = threading.Thread(target=diagnosis_run)
    other.start()
    running.wait()
    step._run_test_cell(nbformat.v4.new_code_cell(), {}, "test_a")
    other.join()
    assert len(budget) == 1 and budget[0] > 1.8, budget


# --- nbgrader's log: only what a person needs ----------------------------------------------------------------

def test_the_log_reports_an_edited_test_cell_and_not_one_left_as_released(small, caplog):
    """Every released test cell differs from the source by its hidden tests: nbgrader warns "checksum has
    changed" for each, in every submission. The course's OverwriteCells warns only for a test cell the student
    edited, and puts every test cell back from the source either way."""
    root, cfg = small
    released = nbformat.read(root / "release" / "a" / "work.ipynb", as_version=4)
    edited = nbformat.from_dict(released)
    edited.cells[2].source = "pass  # 学生改了测试"
    resources = {"nbgrader": {"notebook": "work", "assignment": "a", "db_url": cfg.CourseDirectory.db_url}}
    source = nbformat.read(root / "source" / "a" / "work.ipynb", as_version=4).cells[2].source
    for nb, warned in ((released, False), (edited, True)):
        caplog.clear()
        with caplog.at_level("WARNING"):
            done, _ = autograde.CourseOverwriteCells().preprocess(nbformat.from_dict(nb), resources)
        assert done.cells[2].source == source
        assert ("'checksum' for cell test_double has changed" in caplog.text) == warned, caplog.text


def test_the_courses_overwrite_cells_puts_back_what_nbgraders_does_reading_the_gradebook_once_a_run(small, monkeypatch):
    """CourseOverwriteCells answers nbgrader's questions about the source cells from the run's Instructor: a
    submission whose cells were tampered with (points, lock, cell type, an unknown cell), and one whose graded
    cells were deleted, come out as nbgrader's own OverwriteCells leaves them, with and without adding missing
    cells back (the course's config adds them), and a run reads the notebook's cells from the gradebook once."""
    from nbgrader.preprocessors import OverwriteCells
    root, cfg = small
    released = nbformat.read(root / "release" / "a" / "work.ipynb", as_version=4)
    tampered = nbformat.from_dict(released)
    tampered.cells[0].metadata.nbgrader["locked"] = False
    tampered.cells[2].metadata.nbgrader["points"] = 50
    tampered.cells[3].cell_type = "code"
    tampered.cells[3].update(outputs=[], execution_count=None)
    tampered.cells.append(nbformat.v4.new_code_cell("1", metadata={"nbgrader": {
        "grade_id": "not_in_the_gradebook", "grade": False, "solution": True, "locked": False, "schema_version": 3}}))
    deleted = nbformat.from_dict(released)
    del deleted.cells[2:]  # the test cell and the written answer
    resources = {"nbgrader": {"notebook": "work", "assignment": "a", "db_url": cfg.CourseDirectory.db_url}}
    reads = []
    from_gradebook = execution.Instructor.from_gradebook.__func__
    monkeypatch.setattr(execution.Instructor, "from_gradebook", classmethod(
        lambda cls, *key: reads.append(key) or from_gradebook(cls, *key)))
    with execution.INSTRUCTORS.during():
        for nb in (tampered, deleted):
            for add in (False, True):
                theirs, ours = (_outcome(step(add_missing_cells=add), nbformat.from_dict(nb), resources)
                                for step in (OverwriteCells, autograde.CourseOverwriteCells))
                assert ours == theirs, (add, nb is deleted)
                if nb is tampered and add:  # nbgrader's own fails on the cell it did not know (staging drops it)
                    assert theirs == "KeyError"
                elif nb is tampered:
                    assert theirs.cells[2].metadata.nbgrader["points"] == 5.0 and theirs.cells[0].metadata.nbgrader["locked"]
                    assert theirs.cells[3].cell_type == "markdown" and "grade_id" not in theirs.cells[4].metadata.nbgrader
                else:
                    assert [grade_id(c) for c in theirs.cells] == ["imports", "double", *["test_double", "why"][:2 * add]]
    assert len(reads) == 1, reads


def _outcome(step, nb, resources):
    """The notebook `step` makes of `nb`, or the name of the exception it raises."""
    try:
        return step.preprocess(nb, resources)[0]
    except Exception as exc:  # noqa: BLE001 - compared, whatever it is
        return type(exc).__name__


def test_a_notebooks_autograded_scores_are_saved_in_one_commit(small):
    """nbgrader's SaveAutoGrades commits after each graded or answer cell; the course's commits once per notebook
    (besides the commit nbgrader's Gradebook makes as it opens), reads the notebook's grades and comments together,
    not with two queries per cell, and saves the same scores and comments."""
    from nbgrader.preprocessors import SaveAutoGrades
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session
    root, cfg = small
    db = cfg.CourseDirectory.db_url
    nb = nbformat.read(root / "release" / "a" / "work.ipynb", as_version=4)
    nb.cells[2].outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="", traceback=[])]
    commits, saved, selects = {}, {}, {}

    for step in (SaveAutoGrades, autograde.CourseSaveAutoGrades):
        sid = str(next(STUDENTS))
        with Gradebook(db) as gb:
            gb.update_or_create_student(sid)
            gb.add_submission("a", sid)

        def count(session, step=step):
            commits[step] = commits.get(step, 0) + 1

        def read(conn, cursor, statement, *_, step=step):
            selects[step] = selects.get(step, 0) + statement.lstrip().upper().startswith("SELECT")

        event.listen(Session, "after_commit", count)
        event.listen(Engine, "before_cursor_execute", read)
        try:
            step().preprocess(nbformat.from_dict(nb), {"nbgrader": {"notebook": "work", "assignment": "a",
                                                                    "student": sid, "db_url": db}})
        finally:
            event.remove(Session, "after_commit", count)
            event.remove(Engine, "before_cursor_execute", read)
        with Gradebook(db) as gb:
            test, why = gb.find_grade("test_double", "work", "a", sid), gb.find_grade("why", "work", "a", sid)
            saved[step] = (test.auto_score, test.needs_manual_grade, why.auto_score, why.needs_manual_grade,
                           gb.find_comment("double", "work", "a", sid).auto_comment)
    assert commits[autograde.CourseSaveAutoGrades] == 2 < commits[SaveAutoGrades]
    assert selects[autograde.CourseSaveAutoGrades] < selects[SaveAutoGrades], selects
    assert saved[autograde.CourseSaveAutoGrades] == saved[SaveAutoGrades] == (0, False, 0, False, "No response.")


def test_an_outcome_reads_its_grades_together(small, monkeypatch):
    """The scores of a graded submission (after every grading, and for each row of a report or an export) come from
    its grades with their cells and maximum scores read together: nbgrader's objects read a grade's cell type and
    its maximum score with a query each. The scores are the same."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from attncourse.grading import records
    root, cfg = small
    statements, found = [], {}

    def count(*args):
        statements.append(args[2])

    event.listen(Engine, "before_cursor_execute", count)
    try:
        for way in ("together", "nbgrader's"):
            if way == "nbgrader's":
                monkeypatch.setattr(records, "_grades", lambda nb: list(nb.grades))
            with Gradebook(cfg.CourseDirectory.db_url) as gb:
                statements.clear()
                found[way] = [records.outcome(gb, root, "a", sid) for sid in ("2023000001", "2023000003")]
                found[way + " statements"] = len(statements)
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert [(o.score, o.max_score, o.cells, o.pending, o.withheld) for o in found["together"]] == [
        (o.score, o.max_score, o.cells, o.pending, o.withheld) for o in found["nbgrader's"]]
    assert found["together"][1].withheld == 5 and found["together"][0].score == 5
    assert found["together statements"] < found["nbgrader's statements"], found


# --- real kernels: student code that writes to its kernel's sockets, graded beside an honest notebook ---------

def _hostile():
    import importlib.util

    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("hostile", ROOT / "catalog" / "hostile.py")
    hostile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hostile)
    return hostile


def _grade(folder, before, **config):
    """The small course's notebook with `before` in front of a correct answer, executed as grading does (a kernel
    of its own, no sandbox): (notebook, failed tests, SubmissionResult)."""
    from conftest import small_source_notebook
    source = small_source_notebook()
    instructor = Instructor({grade_id(c): c.source for c in source.cells}, ["test_double"], ["imports", "test_double"])
    source.cells[1].source = before + "def double(x):\n    return x + x\n"
    result = SubmissionResult()
    try:
        nb, failed = CourseExecute(**config).run(source, {"metadata": {"path": str(folder)}}, instructor, result)
    except SubmissionFailed:
        return None, {}, result
    return nb, failed, result


@pytest.mark.slow  # two kernels at once
def test_a_kernel_whose_iopub_a_thread_writes_to_is_graded_beside_an_honest_one(tmp_path):
    """The concurrent writer (catalog/hostile.py k82, there in the sandbox): a thread writes to the kernel's IOPub
    socket while the kernel prints, so frames of the two interleave, and sends badly signed ones. It is graded at
    the same time as an honest notebook: the writer's answer passes and is held with a note naming its cell (or,
    in some runs, the two threads on one zmq socket crash its kernel: failed as crashed, as os._exit is), the
    honest one keeps everything and has no note. (Without the check, jupyter_client raised `Invalid Signature`
    and the run stopped.)"""
    from concurrent.futures import ThreadPoolExecutor
    hostile = _hostile()
    with ThreadPoolExecutor(2) as pool:
        (writer, writer_failed, held), (honest, honest_failed, kept) = pool.map(
            lambda before: _grade(tmp_path, before, timeout=60), [hostile.IOPUB_WRITER, ""])
    assert kept.failure == "" and honest_failed == {} and honest.cells[2].outputs == []
    assert kept.held == set() and kept.flags == [], kept.flags
    if held.failure != CRASHED:
        assert held.failure == "" and writer_failed == {} and "同时打印" in str(writer.cells[1].outputs)
        assert held.held == {"test_double"} and any(f"单元格 double：内核的消息{hostile.UNREADABLE}" in f
                                                    for f in held.flags), held.flags


LOST_REPLY = """from ipykernel.kernelapp import IPKernelApp
_session = IPKernelApp.instance().kernel.session
_send = _session.send
def _no_reply(stream, msg_or_type, *args, **kwargs):  # this cell's reply never leaves the kernel
    if msg_or_type == "execute_reply":
        _session.send = _send
        return {"content": {"status": "ok"}}
    return _send(stream, msg_or_type, *args, **kwargs)
_session.send = _no_reply
"""


@pytest.mark.slow  # a kernel, and a cell's timeout
def test_a_cell_whose_reply_never_comes_while_the_kernel_is_free_is_counted_and_grading_goes_on(tmp_path):
    """As when its reply was dropped: the cell times out, the interrupt is not answered (nothing runs), but the
    kernel serves the probe, so the cell is counted, the submission held, and the tests run."""
    nb, failed, result = _grade(tmp_path, LOST_REPLY, timeout=3, interrupt_grace=2)
    assert result.failure == "" and failed == {} and result.held == {"test_double"}
    assert any("单元格 double：内核的消息无法读取或缺失" in f and "shell 通道 1 条" in f for f in result.flags), result.flags


@pytest.mark.slow  # a kernel
def test_a_students_error_is_kept_as_python_shows_it(tmp_path):
    """A grading kernel formats a student's error as Python does (the cell, the line, the exception), without
    IPython's highlighted context lines, which took 30 ms an error; formgrader shows it to the TA."""
    nb, _, result = _grade(tmp_path, "def broken():\n    raise ValueError('第二行出错')\n\n\nbroken()\n")
    assert result.failure == ""
    [error] = [out for out in nb.cells[1].outputs if out.output_type == "error"]
    text = "\n".join(error.traceback)
    assert "Cell \x1b[1;32mIn[" in text and "line 2" in text and "ValueError" in text and "第二行出错" in text, text
    assert "---->" not in text and len(text) < 1000, text


@pytest.mark.slow  # a3 graded in an ordinary kernel
def test_ordinary_kernels_grade_a_correct_answer_as_preloaded_ones_do(tmp_path):
    """Where no preloading process can run (macOS, Windows, a zygote that failed to start), kernels are ordinary:
    the notebook's import cell would then load torchvision's and NVML's libraries through ctypes after the watch
    is installed, and every test that forbids something was held. The kernel imports them first, as the preloading
    process does: a correct a3 answer keeps every point, with no hold."""
    from attncourse.grading import commands
    from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
    from attncourse.grading.course import nbgrader_config

    from conftest import auto_points, copy_course, course
    root = copy_course(tmp_path / "course")
    course(root, "release", "a3_gqa")
    catalog = load_catalog(root, "a3_gqa")
    rel = nbformat.read(root / "release" / "a3_gqa" / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    (root / "submitted" / "s1" / "a3_gqa").mkdir(parents=True)
    nbformat.write(answered(rel, source_notebook(root, "a3_gqa", catalog)),
                   root / "submitted" / "s1" / "a3_gqa" / f"{catalog.NOTEBOOK}.ipynb")
    [graded] = commands.grade_submissions(nbgrader_config(root), [("a3_gqa", "s1")], jobs=1, warn=lambda _: None,
                                          preload=False)
    assert graded.status == Status.GRADED and graded.holds == [], (graded.status, graded.flags)
    assert graded.score + graded.pending == graded.max_score and graded.score == auto_points("a3_gqa"), graded
