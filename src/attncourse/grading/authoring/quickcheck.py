"""The author's quick loop over a catalog, through the real grading path.

`python -m attncourse.grading.authoring.quickcheck a1_scoring [case ...]` copies the course to a scratch folder, releases
the assignment, grades the reference answer, the lecturer's code and every catalogued variant, and prints
where each lost points and why. `tests/test_catalog.py` is the proof; this is the loop while writing.
"""
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Collection
from pathlib import Path

import nbformat
from sqlalchemy.exc import SAWarning

from ...config import find_root
from .. import commands, logs
from ..catalogs import load_catalog, source_notebook
from ..cells import grade_id, test_cell_ids
from ..course import copy_course_files, folders, nbgrader_config, use_this_environment
from ..model import Outcome
from ..release import student_version as release
from .variants import catalog_cases


def failed_tests(root: Path, outcome: Outcome, tests: Collection[str]) -> dict[str, str]:
    """{test grade_id: verdict} of the cells where `outcome` lost points, read from its autograded notebook."""
    found = {}
    for path in folders(root).autograded(outcome.student, outcome.assignment).glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
            gid = grade_id(cell)
            if gid is not None and gid in tests and errors:
                found[gid] = errors[-1].evalue
    return found


def main(assignment: str, only: Collection[str] = ()) -> int:
    use_this_environment()
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's ORM chatter says nothing to an author
    source_root = find_root()
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_course_files(source_root, tmp)
        log = logs.to_file(Path(tempfile.gettempdir()) / f"quickcheck-{assignment}.log")
        release.release_all(nbgrader_config(root), root, [assignment])
        catalog = load_catalog(root, assignment)
        cases = {k: v for k, v in catalog_cases(root, assignment).items() if not only or k in only}
        pairs = []
        for student, (nb, _) in cases.items():
            folder = folders(root).submitted(student, assignment)
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{catalog.NOTEBOOK}.ipynb")
            pairs.append((assignment, student))
        start = time.time()
        outcomes = commands.grade_submissions(nbgrader_config(root), pairs, jobs=os.cpu_count() or 1,
                                              warn=lambda _: None)
        tests = set(test_cell_ids(source_notebook(root, assignment, catalog)))
        bad = 0
        for o in outcomes:
            expected = cases[o.student][1]
            failed = failed_tests(root, o, tests) if o.status.has_score else {o.reason: ""}
            ok = set(failed) == expected
            bad += not ok
            print(f"{'OK ' if ok else 'BAD'} {o.student:36s} lost={sorted(failed)}"
                  + ("" if ok else f" expected={sorted(expected)}") + (f" flags={o.flags}" if o.flags else ""))
            for cell, message in failed.items():
                print(f"      {cell}: {message[:200]}")
        print(f"{len(outcomes)} cases in {time.time() - start:.0f} s, {bad} not as catalogued (nbgrader's log: {log})")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
