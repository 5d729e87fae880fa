"""How grading's cost grows with the size of the class: the demo class copied to 20, 100 and 400 submissions.

    .venv/bin/python benchmarks/grading_growth.py [--sizes 20,100,400] [--jobs 2]

A size counts submission notebooks: one student's submission of one assignment (an (assignment, student) pair).
The demo class's gradable submissions (grading_speed.py's students, without the crashing, looping and corrupt ones)
are copied in order, student by student, each student's assignments together, under new ids (`s0001_demo_full`,
`s0001_demo_lecturer`, ..., `s0002_demo_full`, ...) until the class has that many. A size that is a multiple of the
number of assignments is whole students; otherwise the last student misses some assignments (a cheap "missing"
feedback page each). A small class is not the demo class's whole mix (20 notebooks of 5 assignments: the first
4 demo students), so its cost per notebook differs a little for that reason too. Every student is in the gradebook,
named, before grading, as `course collect` puts them there. Each size gets a fresh scratch course (its own
gradebook and records) and goes through the commands an instructor runs:
- grading: `commands.grade_submissions`, the course path (each kernel sandboxed where bubblewrap works), --jobs;
- feedback: `course feedback` (`commands.class_outcomes`, `feedback.publish`), seconds per published page;
- report and export: `course report` and `course export` (`class_outcomes`, `write_report`, `export_grades`).
Memory, sampled every 0.1 s with psutil (ipykernel's dependency): the grader process's resident memory, its peak
less its level when the size started; and the peak of the summed resident memory of its child processes (the
preloading process and the kernels; the pages a fork shares count in every process, so this overstates them).

Each run has a fixed start (the preloading process, the sandbox check), spread over more notebooks in a larger
class, so ratios to the smallest size below 1 are expected; a cost per notebook that grows with the class shows
as a ratio that rises. Prints a row per size, a Markdown table for the README, and checks that every copy got, in
every test cell, the score its demo student gets in a course of its own ("identical grades", exit 1 if not).
Not run in CI.
"""
import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings

import psutil
from grading_speed import cell_scores, scratch_course
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

from attncourse.config import find_root
from attncourse.grading import commands
from attncourse.grading.course import nbgrader_config, use_this_environment
from attncourse.grading.isolation.sandbox import Sandbox
from attncourse.grading.model import Status
from attncourse.grading.publish import feedback

MiB = 1 << 20


def quiet(_):
    pass


class PeakMemory:
    """The peak resident memory of this process (above its level at the start) and of its children, sampled."""

    def __init__(self, every=0.1):
        self.me, self.every = psutil.Process(), every
        self.start = self.me.memory_info().rss
        self.grader = self.children = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.wait(self.every):
            self.grader = max(self.grader, self.me.memory_info().rss - self.start)
            total = 0
            for child in self.me.children(recursive=True):
                with contextlib.suppress(psutil.Error):  # a kernel that ended meanwhile
                    total += child.memory_info().rss
            self.children = max(self.children, total)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def silenced():
    """The commands' lines and nbgrader's log on the terminal, kept out of the benchmark's output."""
    both = contextlib.ExitStack()
    both.enter_context(contextlib.redirect_stdout(io.StringIO()))
    both.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return both


def timed(fn):
    """(seconds, fn's result)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def copies(sources, size):
    """{(assignment, new student): (assignment, demo student)}: the demo's pairs, copied in order under new ids
    until there are `size` of them."""
    return {(a, f"s{k // len(sources) + 1:04d}_{s}"): (a, s) for k in range(size)
            for a, s in [sources[k % len(sources)]]}


def class_course(root, tmp, size):
    """A fresh scratch course whose submitted/ holds `size` copied submissions, every student in the gradebook;
    returns (course, {copy: source})."""
    course, sources = scratch_course(root, tmp, f"class_{size}")
    demo_class = course / "demo_class"
    (course / "submitted").rename(demo_class)
    copied = copies(sources, size)
    for (a, student), (_, source) in copied.items():
        shutil.copytree(demo_class / source / a, course / "submitted" / student / a)
    with Gradebook(nbgrader_config(course).CourseDirectory.db_url) as gb:
        for number, student in enumerate(sorted({s for _, s in copied}), 1):
            gb.update_or_create_student(student, last_name="演示", first_name=f"{number:04d}")
    return course, copied


def feedback_report_export(course):
    """`course feedback`, then `course report` and `course export`, as the commands run them; returns their
    seconds."""
    cfg = nbgrader_config(course)
    t_feedback, _ = timed(lambda: feedback.publish(cfg, course, commands.class_outcomes(course), say=quiet))
    t_report, _ = timed(lambda: (commands.write_report(course, commands.class_outcomes(course)),
                                 commands.export_grades(course, course / "build" / "lms_grades.csv")))
    return t_feedback, t_report


def reference_scores(root, tmp, largest, jobs):
    """{(assignment, demo student): {test cell: score}} of the demo submissions the `largest` class copies, graded
    in a course of their own. Its feedback, report and export are made too, untimed, so that what is done once
    per process (imports, templates, fonts) is not counted in the smallest class."""
    course, sources = scratch_course(root, tmp, "reference")
    pairs = sorted(set(copies(sources, largest).values()))
    with silenced():
        commands.grade_submissions(nbgrader_config(course), pairs, jobs=jobs, warn=quiet)
        feedback_report_export(course)
    scores = {}
    for (a, student, cell), score in cell_scores(course, pairs).items():
        scores.setdefault((a, student), {})[cell] = score
    return scores


def differences(course, copied, reference):
    """[(assignment, copy, cell, its score, the demo student's)] for each test cell scored otherwise."""
    got = {}
    for (a, student, cell), score in cell_scores(course, list(copied)).items():
        got.setdefault((a, student), {})[cell] = score
    found = []
    for pair, source in copied.items():
        mine, want = got.get(pair, {}), reference[source]
        found += [(*pair, cell, mine.get(cell), want.get(cell)) for cell in sorted(set(mine) | set(want))
                  if mine.get(cell) != want.get(cell)]
    return found


def measure(root, tmp, size, jobs):
    """Grade, publish feedback, report and export one class of `size` submissions; returns (row, course,
    copied)."""
    course, copied = class_course(root, tmp, size)
    with PeakMemory() as memory, silenced():
        t_grade, outcomes = timed(lambda: commands.grade_submissions(nbgrader_config(course), list(copied), jobs=jobs,
                                                                     warn=quiet))
        t_feedback, t_report = feedback_report_export(course)
    broken = [f"{o.assignment} {o.student}: {o.reason}" for o in outcomes if o.status == Status.ERROR]
    pages = len(list((course / "feedback").glob("*/*/*.html")))
    row = {"size": size, "students": len({s for _, s in copied}), "grade": t_grade / size,
           "pages": pages, "feedback": t_feedback / max(pages, 1), "report": t_report,
           "grader_mib": memory.grader / MiB, "children_mib": memory.children / MiB, "broken": broken}
    return row, course, copied


def print_rows(rows, jobs, sandboxed):
    first = rows[0]
    print(f"\n{os.cpu_count()} CPU cores, {jobs} jobs, kernels {sandboxed}")
    header = ("| notebooks | students | grade s/notebook | × smallest | feedback s/page | × smallest | "
              "report + export s | ms/notebook | × smallest | grader peak RSS growth MiB | children peak RSS MiB |")
    print(header)
    print("|" + "---:|" * (header.count("|") - 1))
    for r in rows:
        print(f"| {r['size']} | {r['students']} | {r['grade']:.2f} | {r['grade'] / first['grade']:.2f}× "
              f"| {r['feedback']:.2f} | {r['feedback'] / first['feedback']:.2f}× | {r['report']:.1f} "
              f"| {1000 * r['report'] / r['size']:.0f} | {r['report'] / r['size'] / (first['report'] / first['size']):.2f}× "
              f"| {r['grader_mib']:.0f} | {r['children_mib']:.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,100,400", help="class sizes in submission notebooks, comma-separated")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    root = find_root()
    use_this_environment()
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's ORM chatter
    with tempfile.TemporaryDirectory() as tmp:
        problem = Sandbox(config=nbgrader_config(root)).problem()
        sandboxed = f"not sandboxed ({problem})" if problem else "sandboxed"
        reference = reference_scores(root, tmp, sizes[-1], args.jobs)
        rows, differ = [], []
        for size in sizes:
            row, course, copied = measure(root, tmp, size, args.jobs)
            rows.append(row)
            differ += differences(course, copied, reference)
            print(f"{size} notebooks ({row['students']} students): grade {row['grade']:.2f} s/notebook, feedback "
                  f"{row['feedback']:.2f} s/page ({row['pages']} pages), report + export {row['report']:.1f} s, "
                  f"grader +{row['grader_mib']:.0f} MiB, children {row['children_mib']:.0f} MiB", flush=True)
            for line in row["broken"]:
                print(f"  tool error: {line}")
        print_rows(rows, args.jobs, sandboxed)
        same = not differ and not any(r["broken"] for r in rows)
        print(f"\nidentical grades: {'yes' if same else 'NO'}")
        for a, student, cell, got, want in differ:
            print(f"  {a} {student} {cell}: {got} (its demo student: {want})")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
