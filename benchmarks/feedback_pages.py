"""Feedback speed on the demo class: `course feedback` alone, over a class graded once and kept.

    .venv/bin/python benchmarks/feedback_pages.py COURSE [--repeat N] [--out PAGES] [--same-as PAGES]

The first run makes COURSE (a scratch copy of this course, put it under build/ so that pages find MathJax)
and grades the demo class in it: every demo student but the looping one (a timeout, not grading) and three
more whose a1 is held for review (one is then rejected, one accepted), each kernel sandboxed where bubblewrap
works. Later runs reuse the grades. Prints seconds per page of a graded submission (the best of N runs of
`feedback.publish` over the whole class, failed ones included). `--out` keeps a copy of the pages; `--same-as`
compares them with pages another version of the code kept: each file the same bytes, or an HTML page the same
once nbconvert's BeautifulSoup pass (which `course feedback` left out) has written it out again.
"""
import argparse
import shutil
import sys
import time
import warnings
from pathlib import Path

import nbformat
from bs4 import BeautifulSoup
from sqlalchemy.exc import SAWarning

from attncourse.config import find_root
from attncourse.grading import commands, records
from attncourse.grading.authoring import demo
from attncourse.grading.cells import grade_id
from attncourse.grading.course import copy_course_files, folders, nbgrader_config, submissions, use_this_environment
from attncourse.grading.publish import feedback

A1, HELD = "a1_scoring", ("demo_held_rejected", "demo_held_accepted", "demo_held")


def graded_demo_class(root, course):
    """The demo class graded in `course`, with three held submissions: one then rejected, one accepted."""
    course = copy_course_files(root, course)
    aids = folders(course).assignments()
    commands.release_assignments(course, aids)
    submitted = demo.write_demo_class(course, course / "submitted", aids)
    shutil.rmtree(submitted / "demo_loop")
    for student in HELD:  # demo_full's a1 importing ctypes: held for review
        shutil.copytree(submitted / "demo_full" / A1, submitted / student / A1)
        path = submitted / student / A1 / "scoring.ipynb"
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if grade_id(cell) == "masked_softmax":
                cell.source = "import ctypes\n" + cell.source
        nbformat.write(nb, path)
    cfg = nbgrader_config(course)
    commands.grade_submissions(cfg, submissions(course / "submitted", aids), jobs=2, warn=lambda _: None)
    for student, accept in zip(HELD[:2], (False, True), strict=True):
        records.decide(cfg.CourseDirectory.db_url, course, A1, student, accept, "助教甲", "演示")


def compare(pages, before):
    """How many files of `pages` are the bytes of `before`'s, and how many are the same page as BeautifulSoup
    writes it; the paths of those that differ."""
    names = sorted(p.relative_to(pages) for p in pages.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(before) for p in before.rglob("*") if p.is_file()), "not the same files"
    same, rewritten, differ = 0, 0, []
    for name in names:
        ours, theirs = (pages / name).read_bytes(), (before / name).read_bytes()
        if ours == theirs:
            same += 1
        elif name.suffix == ".html" and str(BeautifulSoup(ours.decode(), "html.parser")).encode() == theirs:
            rewritten += 1
        else:
            differ.append(str(name))
    return same, rewritten, differ


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--same-as", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    use_this_environment()
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's ORM chatter
    course = args.course.resolve()
    if not (course / "gradebook.db").exists():
        graded_demo_class(find_root(), course)
    cfg, outcomes = nbgrader_config(course), commands.class_outcomes(course)
    best = float("inf")
    for _ in range(args.repeat):
        shutil.rmtree(folders(course).feedback(), ignore_errors=True)
        start = time.perf_counter()
        feedback.publish(cfg, course, outcomes, say=lambda _: None)
        best = min(best, time.perf_counter() - start)
    graded = sum(len(list(folders(course).feedback(o.student, o.assignment).glob("*.html")))
                 for o in outcomes if o.status.has_score)
    failed = [f"{o.student}/{o.assignment}: {note}" for o in outcomes for note in o.notes if "反馈" in note]
    print(f"feedback pages: {best / graded:.3f} s/page ({graded} graded of {len(outcomes)} outcomes, "
          f"best of {args.repeat})" + "".join(f"\n  {line}" for line in failed))
    if args.out:
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.copytree(folders(course).feedback(), args.out)
    if args.same_as:
        same, rewritten, differ = compare(folders(course).feedback(), args.same_as)
        print(f"against {args.same_as}: {same} files the same bytes, {rewritten} pages the same once BeautifulSoup "
              f"wrote them, {len(differ)} differ" + "".join(f"\n  {name}" for name in differ))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
