"""Grading throughput on a Dask cluster on this machine, against local grading, in the same run.

    .venv/bin/python benchmarks/cluster_throughput.py [--unit a1_scoring] [--jobs N]

The class is the unit's catalog (correct answers, every catalogued mistake and its twin), graded by `course grade`
as an instructor runs it, each path in a scratch course of its own and a fresh process: locally with `--jobs`
(default: the CPU count), then with `--cluster` on 1 and on 2 `dask worker` processes of one thread each on this
machine (started before the clock starts; registering the grading plugin, which starts each worker's preloaded
kernels, is timed). Prints seconds per notebook and the ratio of each path's throughput to local grading, and
checks that every test cell got the same score on every path.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

from attncourse.config import find_root
from attncourse.grading.authoring.local_cluster import LocalCluster
from attncourse.grading.authoring.variants import catalog_cases, load_catalog
from attncourse.grading.course import copy_course_files, nbgrader_config, use_this_environment


def scratch_course(root, parent, name, unit):
    dest = copy_course_files(root, Path(parent) / name)
    course(dest, "release", unit)
    notebook = f"{load_catalog(dest, unit).NOTEBOOK}.ipynb"
    students = []
    for case, (nb, _) in catalog_cases(dest, unit).items():
        folder = dest / "submitted" / case / unit
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / notebook)
        students.append(case)
    return dest, students


def cell_scores(course, unit, students):
    with Gradebook(nbgrader_config(course).CourseDirectory.db_url) as gb:
        return {(s, g.cell.name): g.auto_score for s in students
                for nb in gb.find_submission(unit, s).notebooks for g in nb.grades}


def course(root, *args) -> float:
    """Seconds that `course <args>` took on the course at `root`."""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "attncourse.cli", "--root", str(root), *args], capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(f"course {' '.join(args)} failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", default="a1_scoring")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    root = find_root()
    use_this_environment()
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's ORM chatter
    with tempfile.TemporaryDirectory() as tmp:
        courses = {}
        for name in ("local", "one_worker", "two_workers"):
            courses[name], students = scratch_course(root, tmp, name, args.unit)
        n = len(students)
        print(f"{n} submissions of {args.unit}, {os.cpu_count()} CPU cores")
        seconds = {"local": course(courses["local"], "grade", args.unit, "--jobs", str(args.jobs))}
        for name, workers in (("one_worker", 1), ("two_workers", 2)):
            with LocalCluster(workers=workers) as cluster:
                seconds[name] = course(courses[name], "grade", args.unit, "--cluster", cluster.address)
        rows = [(f"local, {args.jobs} jobs (baseline)", "local"), ("Dask, 1 worker of 1 thread", "one_worker"),
                ("Dask, 2 workers of 1 thread", "two_workers")]
        print(f"\n{'path':36s} {'s/notebook':>10s} {'notebooks/min':>13s} {'vs local':>9s}")
        for label, name in rows:
            print(f"{label:36s} {seconds[name] / n:10.2f} {60 * n / seconds[name]:13.1f} "
                  f"{seconds['local'] / seconds[name]:8.2f}x")
        print(f"\n2 workers / 1 worker: {seconds['one_worker'] / seconds['two_workers']:.2f}x")
        base = cell_scores(courses["local"], args.unit, students)
        same = all(base == cell_scores(courses[name], args.unit, students) for name in ("one_worker", "two_workers"))
        print(f"identical grades in every test cell: {'yes' if same else 'NO'}")
        return 0 if same and base else 1


if __name__ == "__main__":
    sys.exit(main())
