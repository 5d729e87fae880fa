"""Autograde speed on the demo class: plain serial `nbgrader autograde` against the course's path.

    .venv/bin/python benchmarks/grading_speed.py [--jobs N]

All paths run in this one process's run, on identical scratch copies of the course, on the demo students
that can be graded (the crashing, looping and corrupt ones measure timeouts, not grading, and are left
out). The course path runs with every kernel sandboxed (where bubblewrap works, else it says so), and
for comparison with ordinary kernels and with preloaded kernels but no sandbox. Prints seconds per
submission notebook for each path, their ratio to the baseline and, for the course path, to what the same
notebooks' own code costs run in this process (`own_code`), and checks that every test cell got the same score
on every path.
"""
import argparse
import builtins
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from unittest import mock

import matplotlib.pyplot as plt
import nbformat
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

from attncourse.config import find_root
from attncourse.grading import commands
from attncourse.grading.authoring import demo
from attncourse.grading.course import assignments, copy_course_files, nbgrader_config, submissions, use_this_environment
from attncourse.grading.publish import feedback
from attncourse.grading.release import student_version as release
from attncourse.grading.run import autograde

SKIP = {"demo_crash", "demo_loop", "demo_corrupt"}


def scratch_course(root, parent, name, config=""):
    dest = copy_course_files(root, Path(parent) / name)
    (dest / "nbgrader_config.py").write_text((dest / "nbgrader_config.py").read_text() + config)
    aids = assignments(dest)
    for aid in aids:  # as `course release` does: generated, checked and recorded
        release.release(nbgrader_config(dest), dest, aid)
    demo.write_demo_class(dest, dest / "submitted", aids)
    for student in SKIP:
        shutil.rmtree(dest / "submitted" / student, ignore_errors=True)
    return dest, submissions(dest / "submitted", aids)


def cell_scores(course, pairs):
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for aid, student in pairs:
            for nb in gb.find_submission(aid, student).notebooks:
                for g in nb.grades:
                    scores[(aid, student, g.cell.name)] = g.auto_score
    return scores


def own_code(root, pairs):
    """Seconds the demo class's notebooks' own code costs, no kernel and no grading: for each submission, its
    assignment's source notebook (the solutions, every visible and hidden test) run top to bottom in this warm
    process, with NBGRADER_EXECUTION set as in grading (experiments that train are skipped). Each notebook runs
    once before it is timed."""
    def run(path):
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        with contextlib.redirect_stdout(io.StringIO()):
            start = time.perf_counter()
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "code":
                    exec(compile(cell.source, str(path), "exec"), namespace)  # noqa: S102 - the instructor's code
            seconds = time.perf_counter() - start
        plt.close("all")
        return seconds

    plt.switch_backend("Agg")  # the notebooks' own figures, drawn off screen
    with mock.patch.dict(os.environ, {"NBGRADER_EXECUTION": "autograde"}):
        notebooks = {aid: next((root / "source" / aid).glob("*.ipynb")) for aid in {a for a, _ in pairs}}
        for path in notebooks.values():
            run(path)
        return sum(run(notebooks[aid]) for aid, _ in pairs)


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    root = find_root()
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    use_this_environment()
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's ORM chatter
    with tempfile.TemporaryDirectory() as tmp:
        per_student, pairs = scratch_course(root, tmp, "per_student")
        per_assignment, _ = scratch_course(root, tmp, "per_assignment")
        ours, _ = scratch_course(root, tmp, "course_path", '\nc.Sandbox.mode = "required"\n')
        cold, _ = scratch_course(root, tmp, "course_path_cold")
        open_, _ = scratch_course(root, tmp, "course_path_no_sandbox", '\nc.Sandbox.mode = "off"\n')
        n = len(pairs)
        print(f"{n} submission notebooks ({', '.join(sorted({s for _, s in pairs}))}), {os.cpu_count()} CPU cores")
        quiet = lambda _: None  # noqa: E731

        def run(cmd, cwd):
            subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        t_student = timed(lambda: [run([nbgrader, "autograde", a, "--student", s, "--force"], per_student)
                                   for a, s in pairs])
        t_assignment = timed(lambda: [run([nbgrader, "autograde", a, "--force"], per_assignment)
                                      for a in sorted({a for a, _ in pairs})])
        graded = []  # the sandboxed path's outcomes, for its feedback
        t_ours = timed(lambda: graded.extend(commands.grade_submissions(nbgrader_config(ours), pairs, jobs=args.jobs,
                                                                        warn=quiet)))
        t_cold = timed(lambda: commands.grade_submissions(nbgrader_config(cold), pairs, jobs=args.jobs, warn=quiet,
                                                     preload=False))
        t_open = timed(lambda: commands.grade_submissions(nbgrader_config(open_), pairs, jobs=args.jobs, warn=quiet))
        t_feedback = timed(lambda: feedback.publish(nbgrader_config(ours), ours, graded, say=quiet))
        pages = len(list((ours / "feedback").rglob("*.html")))

        base = cell_scores(per_student, pairs)
        differ = [(name, cell, base.get(cell), got.get(cell))
                  for name, c in (("per assignment", per_assignment), ("sandboxed", ours), ("ordinary kernels", cold),
                                  ("no sandbox", open_))
                  for got in [cell_scores(c, pairs)] for cell in sorted(set(base) | set(got))
                  if base.get(cell) != got.get(cell)]
        same = not differ
        t_own = own_code(root, pairs)
        rows = [("nbgrader autograde, one call per submission (baseline)", t_student),
                ("nbgrader autograde, one call per assignment", t_assignment),
                (f"course path, ordinary kernels, no sandbox ({args.jobs} jobs)", t_cold),
                (f"course path, preloaded kernels, no sandbox ({args.jobs} jobs)", t_open),
                (f"course path, preloaded kernels, each sandboxed ({args.jobs} jobs)", t_ours)]
        print(f"\n{'path':58s} {'s/notebook':>10s} {'speed-up':>9s}")
        for name, seconds in rows:
            print(f"{name:58s} {seconds / n:10.2f} {t_student / seconds:8.2f}x")
        own = "the notebooks' own code, in this process (no kernel, no grading)"
        print(f"{own:58s} {t_own / n:10.2f}")
        print(f"\nratio baseline / course path with isolation: {t_student / t_ours:.2f}x; "
              f"against one call per assignment: {t_assignment / t_ours:.2f}x")
        print(f"course path with isolation / the notebooks' own code: {t_ours / t_own:.2f}x")
        print(f"feedback pages: {t_feedback / pages:.3f} s/page ({pages} pages of the sandboxed course path's class)")
        print(f"identical grades in every test cell: {'yes' if same else 'NO'}")
        for name, (aid, student, cell), want, got in differ:  # each cell that differs from the baseline
            print(f"  {name}: {aid} {student} {cell}: {got} (baseline {want})")
        profile(root, tmp, quiet)
        return 0 if same else 1


def profile(root, tmp, quiet):
    """Where a sandboxed notebook's seconds go, graded one at a time so that no step waits on another."""
    course, pairs = scratch_course(root, tmp, "profile", '\nc.Sandbox.mode = "required"\n')
    start = time.perf_counter()
    with mock.patch.object(autograde, "THREADS_PER_JOB", 1):  # no submission keeps its books during another's run
        outcomes = commands.grade_submissions(nbgrader_config(course), pairs, jobs=1, warn=quiet)
    total = time.perf_counter() - start
    shares = {}
    for outcome in outcomes:
        for step, seconds in outcome.timings.items():
            shares[step] = shares.get(step, 0.0) + seconds
    shares["nbgrader's bookkeeping (sanitizing, gradebook, files, records)"] = sum(
        o.seconds for o in outcomes) - sum(shares.values())
    shares["the run's own start (sandbox check, preloading process, staging)"] = total - sum(o.seconds for o in outcomes)
    shares["feedback (course feedback)"] = timed(lambda: feedback.publish(nbgrader_config(course), course, outcomes, say=quiet))
    spent = sum(shares.values())
    print(f"\nprofile, one job, sandboxed: {spent / len(pairs):.2f} s per notebook")
    print(f"{'step':66s} {'s/notebook':>10s} {'share':>6s}")
    for step, seconds in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"{step:66s} {seconds / len(pairs):10.2f} {100 * seconds / spent:5.1f}%")


if __name__ == "__main__":
    sys.exit(main())
