"""The hostile class (catalog/hostile.py), graded end to end by the instructor's commands (`course release`,
`course grade --class`, `course feedback`, `course report`) with the sandbox required.

Every case must get its expected outcome, every honest control full marks, and nothing a student did may
reach the gradebook, other students, the feedback, the CSV or the machine after the run.
"""
import csv
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import nbformat
import pytest
from nbgrader.api import Gradebook

from attncourse.grading.model import Status
from attncourse.grading.publish import feedback
from attncourse.grading.records import Record, read_record
from attncourse.grading.release import student_version as release
from attncourse.grading.run.execution import CourseExecute

from conftest import ROOT, auto_points, copy_course, failure_messages

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

TEST_CONFIG = """
# hostile-class test: short limits, and no grading without a sandbox
c.Execute.timeout = 20  # a fork bomb of ~100 forks of a torch process takes seconds on a busy machine
c.CourseExecute.interrupt_grace = 3
c.Sandbox.mode = "required"
c.Sandbox.uid_base = 200000  # uids of its own: other test files grade at the same time (pytest-xdist)
"""
SANDBOX_UIDS = range(200000, 210000)


SECRETS = ("grader-secret-4711", "keyring-secret-1234")  # the grading run's environment; what s54 writes


def course(root, *args, timeout=1800, env=None):
    return subprocess.run([sys.executable, "-m", "attncourse.cli", *args], cwd=root, capture_output=True,
                          text=True, timeout=timeout, env=env)


def grade_class(root, class_dir):
    """What an instructor runs: release, grade the class folder (with a secret in the grader's environment),
    feedback, report. Returns the grade run."""
    assert course(root, "release", "a1_scoring", "a2_multihead").returncode == 0
    run = course(root, "grade", "--class", str(class_dir), env={**os.environ, "ATTN_TEST_SECRET": SECRETS[0]})
    for step in ("feedback", "report"):
        done = course(root, step)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return run


def load_hostile():
    spec = importlib.util.spec_from_file_location("hostile", ROOT / "catalog" / "hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sandbox_processes():
    """Processes still running as a sandbox uid (a zombie, already dead and waiting to be reaped, is not)."""
    ps = subprocess.run(["ps", "-e", "-o", "uid=,pid=,stat=,args="], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines()
            if line.split() and int(line.split()[0]) in SANDBOX_UIDS and not line.split()[2].startswith("Z")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("hostile_course"))
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text() + TEST_CONFIG)
    hostile = load_hostile()
    class_dir = root / "hostile_class"
    students = hostile.write_class(root, class_dir)
    honest_before = (class_dir / "c01_honest" / "a1_scoring" / "scoring.ipynb").read_bytes()
    run = grade_class(root, class_dir)
    time.sleep(10)  # longer than the detached process of h20 would wait before forging a row
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    return {"root": root, "run": run, "students": students, "rows": rows, "class_dir": class_dir,
            "honest_before": honest_before}


def test_the_run_completes_for_everyone(graded):
    run = graded["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "警告：无法建立评分沙箱" not in run.stdout
    assert len(graded["students"]) >= 40


def test_student_text_cannot_forge_the_console(graded):
    out = graded["run"].stdout
    assert "\x1b" not in out and "\r" not in out.replace("\r\n", "\n")
    assert len([line for line in out.splitlines() if re.match(r"\[[^\]]*\] a1_scoring\s+c01_honest\s", line)]) == 1
    forged = [line for line in out.splitlines() if "s58_forged_line" in line and line.startswith("[")]
    assert len(forged) == 1 and "20/20" not in forged[0], forged


def test_grades_csv_has_one_row_per_case_and_nothing_else(graded):
    rows = graded["rows"]
    assert rows, "grades.csv is empty"
    expected = {(case["assignment"], student) for student, case in graded["students"].items()}
    got = [(r["assignment"], r["student"]) for r in rows]
    assert len(got) == len(set(got)), "duplicated rows"
    handed_in = {key for key, r in zip(got, rows, strict=True) if r["status"] != "missing"}
    assert handed_in == expected, "forged or missing rows"  # each student is missing the assignments it skipped


def _earned(root, assignment, student):
    """{test cell: autograded score} of a graded submission, from the gradebook and, for cells held for review
    (whose points are set aside until a person decides), from the record."""
    held = (read_record(root, assignment, student) or Record(Status.GRADED)).held
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sub = gb.find_submission(assignment, student)
        return {g.cell.name: (held.get(g.cell.name, g.auto_score), g.max_score) for nb in sub.notebooks
                for g in nb.grades
                if g.cell.cell_type == "code" and g.cell.name not in {c.name for c in nb.notebook.solution_cells}}


def _lost(earned):
    """The test cells of `_earned` scored below their maximum."""
    return {cell for cell, (score, maximum) in earned.items() if score < maximum}


def test_every_case_gets_its_expected_outcome(graded):
    root, rows = graded["root"], {(r["assignment"], r["student"]): r for r in graded["rows"]}
    assert rows
    wrong = []
    for student, case in graded["students"].items():
        want, row = case["expect"], rows[(case["assignment"], student)]
        if want.get("may_crash") and row["status"] == "failed" and "内核崩溃" in row["reason"]:
            continue  # the student's code killed its own kernel: failed with the reason, as case h32
        problems = []
        if row["status"] not in ({"graded", "held"} if want["status"] == "graded" else {want["status"]}):
            problems.append(f"status {row['status']} ({row['reason']})")
        elif want["status"] == "graded":
            earned = _earned(root, case["assignment"], student)
            assert earned, f"{student}: no test cells in the gradebook"
            total, maximum = sum(s for s, _ in earned.values()), sum(m for _, m in earned.values())
            lost = _lost(earned)
            if "score" in want and total != (maximum if want["score"] == "full" else want["score"]):
                problems.append(f"earned {total}/{maximum}, expected {want['score']}\n"
                                + failure_messages(root, case["assignment"], student, lost))
            if "lost" in want and lost != want["lost"]:
                problems.append(f"lost {sorted(lost)}, expected {sorted(want['lost'])}")
            held = set((read_record(root, case["assignment"], student) or Record(Status.GRADED)).held)
            if row["review"] and float(row["withheld_for_review"]) != sum(earned[c][0] for c in held if c in earned):
                problems.append(f"flagged, {row['withheld_for_review']} points held back, not those of {sorted(held)}")
            if not row["review"] and float(row["score"]) != total:
                problems.append(f"CSV score {row['score']} but tests awarded {total}")
        if want.get("flags") == [] and row["review"]:
            problems.append(f"unexpected flags: {row['review']}")
        problems += [f"no flag about {w!r} in {row['review']!r}" for w in want.get("flags", []) if w not in row["review"]]
        if "reason" in want and want["reason"] not in row["reason"]:
            problems.append(f"reason {row['reason']!r} lacks {want['reason']!r}")
        problems += [f"notes {row['notes']!r} lack {w!r}" for w in want.get("notes", []) if w not in row["notes"]]
        if want.get("secret") == "absent":
            outputs = json.dumps([c.get("outputs", []) for p in (root / "autograded" / student).rglob("*.ipynb")
                                  for c in nbformat.read(p, as_version=4).cells], ensure_ascii=False)
            pages = "".join(p.read_text(encoding="utf-8") for p in (root / "feedback" / student).rglob("*.html"))
            problems += [f"{secret!r} reached the student" for secret in SECRETS if secret in outputs + pages]
        feedback = root / "feedback" / student / case["assignment"]
        if want.get("feedback") == "published" and not list(feedback.glob("*.html")):
            problems.append("feedback missing")
        if problems:
            wrong.append(f"{student} ({case['what']}): " + "; ".join(problems))
    assert not wrong, "\n".join(wrong)


def test_honest_controls_keep_full_marks_and_feedback(graded):
    controls = [(s, c) for s, c in graded["students"].items() if s.startswith("c")]
    assert len(controls) >= 8
    rows = {(r["assignment"], r["student"]): r for r in graded["rows"]}
    for student, case in controls:
        row = rows[(case["assignment"], student)]
        assert row["status"] == "graded" and not row["review"] and float(row["score"]) == float(row["max_score"]) - float(row["pending_manual"]), \
            f"{row}\n" + failure_messages(graded["root"], case["assignment"], student,
                                          _lost(_earned(graded["root"], case["assignment"], student)))
        assert list((graded["root"] / "feedback" / student / case["assignment"]).glob("*.html")), student


def test_gradebook_and_submissions_are_untouched(graded):
    root = graded["root"]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for aid in ("a1_scoring", "a2_multihead"):
            source = {c.metadata["nbgrader"]["grade_id"]: c.source
                      for p in (root / "source" / aid).glob("*.ipynb") for c in nbformat.read(p, as_version=4).cells
                      if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")}
            stored = {c.name: c.source for nb in gb.find_assignment(aid).notebooks for c in nb.source_cells}
            assert source and all(stored[name] == text for name, text in source.items()), f"{aid}: tests changed"
        manual = [g for s in gb.students for sub in s.submissions for nb in sub.notebooks for g in nb.grades
                  if g.manual_score is not None]
        assert manual == [], "no manual grade was entered, yet some exist"
    for folder in (graded["class_dir"], graded["root"] / "submitted"):
        assert (folder / "c01_honest" / "a1_scoring" / "scoring.ipynb").read_bytes() == graded["honest_before"]


def test_feedback_leaks_nothing_and_carries_no_active_content(graded):
    root = graded["root"]
    pages = sorted((root / "feedback").rglob("*.html"))
    assert pages
    hidden = {aid: release.secret_lines(nbformat.read(next((root / "source" / aid).glob("*.ipynb")), as_version=4),
                                        hidden_only=True) for aid in ("a1_scoring", "a2_multihead")}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        aid = page.parent.name
        assert hidden[aid] and not [line for line in hidden[aid] if line in text], page
        body = text.split("</style>")[-1]  # the student's own source shows as escaped text; live tags must not
        assert not re.search(r"<script[^>]*>[^<]*alert|<img[^>]*onerror|application/javascript", body), page


def test_every_published_page_has_a_bounded_size(graded):
    """Whatever a student's code printed, raised or held (s78: 6 MB of source, a 15 MB exception, a display()
    flood; h25: 100 MB printed; s65: a test that gets a 5-million-character message): each feedback page and the
    report stay under `MAX_PAGE_BYTES`, and an autograded notebook adds to the submitted file at most what the
    grader's run may keep (`max_notebook_output_bytes`) and some verdicts."""
    root = graded["root"]
    pages = sorted((root / "feedback").rglob("*.html"))
    cut = [p for p in pages if p.parts[-3] == "s78_huge_pages" and "个字符未显示" in p.read_text(encoding="utf-8")]
    assert len(cut) == 1  # its assignment's page, cut (the other assignment's page says it was not handed in)
    for page in pages + [root / "build" / "report" / "report.html"]:
        assert page.stat().st_size <= feedback.MAX_PAGE_BYTES, f"{page}: {page.stat().st_size} bytes"
    notebooks = sorted((root / "autograded").rglob("*.ipynb"))
    assert len(notebooks) >= 40
    run_output = 3 * CourseExecute.max_notebook_output_bytes.default_value  # counted in characters: 3 bytes for 刷
    for notebook in notebooks:
        submitted = sum(p.stat().st_size for p in (root / "submitted").joinpath(*notebook.parts[-3:-1]).glob("*.ipynb"))
        assert notebook.stat().st_size <= submitted + run_output + 100_000, f"{notebook}: {notebook.stat().st_size} bytes"


def test_nothing_keeps_running_after_the_grader(graded):
    assert sandbox_processes() == []


def test_a_killed_grader_leaves_no_grade_that_looks_finished(tmp_path):
    """Kill `course grade` while it grades; the next run grades what was left, and no honest student is 'kept'
    at a grade that was never finished."""
    root = copy_course(tmp_path / "course")
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text() + TEST_CONFIG)
    hostile = load_hostile()
    hostile.CASES = [c for c in hostile.CASES if c["id"].startswith("c")]
    students = hostile.write_class(root, root / "class")
    assert len(students) >= 6
    assert course(root, "release", "a1_scoring", "a2_multihead").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "attncourse.cli", "grade", "--class", str(root / "class")],
                            cwd=root, stdout=subprocess.PIPE, text=True, start_new_session=True)
    for line in proc.stdout:
        if re.match(r"\[2/", line):
            break
    assert proc.poll() is None, "the grader finished before it could be killed"
    proc.kill()
    proc.wait()
    deadline = time.time() + 15  # a killed kernel of a GB or so takes a moment to exit on a loaded machine
    while sandbox_processes() and time.time() < deadline:
        time.sleep(0.5)
    assert sandbox_processes() == [], "a kernel outlived the killed grader"
    run = course(root, "grade")
    assert run.returncode == 0 and course(root, "report").returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert re.search(r"\] \S+\s+\S+\s+✔", run.stdout), "the second run should grade what the first left unfinished"
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] != "missing"]  # each skipped the other assignment
    assert len(rows) == len(students)
    for row in rows:
        assert float(row["score"]) == float(row["max_score"]) - float(row["pending_manual"]), row


def test_a_locked_gradebook_is_waited_for(tmp_path):
    """Someone else holds the gradebook's write lock for longer than grading one student takes: grading waits
    for it (it is still running when the lock is let go) and then completes."""
    import sqlite3
    root = copy_course(tmp_path / "course")
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text() + TEST_CONFIG)
    hostile = load_hostile()
    hostile.CASES = [c for c in hostile.CASES if c["id"] == "c01_honest"]
    hostile.write_class(root, root / "class")
    assert course(root, "release", "a1_scoring").returncode == 0
    start = time.time()
    unlocked = course(root, "grade", "--class", str(root / "class"))  # collecting too: longer than a regrade
    alone = time.time() - start
    assert unlocked.returncode == 0
    hold = alone + 8
    holder = sqlite3.connect(root / "gradebook.db", timeout=30)
    holder.execute("BEGIN EXCLUSIVE")
    proc = subprocess.Popen([sys.executable, "-m", "attncourse.cli", "grade", "--student", "c01_honest"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(hold)
    still_waiting = proc.poll() is None
    holder.rollback()
    holder.close()
    out, err = proc.communicate(timeout=600)
    assert still_waiting, f"grading one student takes {alone:.0f} s, yet it had ended after {hold:.0f} s with the lock held"
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    assert re.search(rf"a1_scoring\s+c01_honest\s+✔ {auto_points('a1_scoring'):g}/", out), out[-2000:]


def test_identity_attacks_reach_no_other_student(tmp_path):
    """The identity attacks of the hostile class, collected after the classmate's honest work: the classmate's
    submission is untouched, each claim stays with its uploader (with a note), and a name no LMS writes makes
    no student. Collected in the middle layer: grading would add nothing to whose work a file is."""
    import shutil

    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.intake import collect
    hostile = load_hostile()
    assert len(hostile.IDENTITY) >= 8
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    honest = nbformat.writes(nbformat.v4.new_notebook())
    victim = hostile.VICTIM.split("_")[0]

    def run(download):
        return collect.collect(nbgrader_config(root), root, download, "a1_scoring", ["scoring.ipynb"],
                               {"multihead.ipynb": "a2_multihead"})
    import zipfile
    with zipfile.ZipFile(tmp_path / "first.zip", "w") as z:
        z.writestr(f"{hostile.VICTIM}/scoring.ipynb", honest)
    assert [t[0] for t in run(tmp_path / "first.zip").taken] == [victim]
    result = run(hostile.write_identity_download(tmp_path / "attacks.zip", honest))
    assert (root / "submitted" / victim / "a1_scoring" / "scoring.ipynb").read_text(encoding="utf-8") == honest
    assert not (root / "submitted_earlier").exists()
    own = {c["id"] for c in hostile.IDENTITY if c["expect"] == "own"}
    assert own and sorted(p.name for p in (root / "submitted").iterdir()) == sorted(own | {victim})
    with Gradebook(nbgrader_config(root).CourseDirectory.db_url) as gb:
        assert sorted(s.id for s in gb.students) == sorted(own | {victim})
    for case in hostile.IDENTITY:
        if case["expect"] == "own":
            text = (root / "submitted" / case["id"] / "a1_scoring" / "scoring.ipynb").read_text(encoding="utf-8")
            assert case["id"] in text, case["what"]
            assert any(n.startswith(case["id"]) and f"自称属于 {victim}" in n for n in result.notes), case["what"]
    listed = [c for c in hostile.IDENTITY if c["expect"] == "listed"]
    assert listed and len(result.unmatched) == len(listed), result.unmatched
    shown = "\n".join(name for name, _ in result.unmatched)
    assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown
