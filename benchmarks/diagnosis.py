"""How often the grader names the right likely mistake, measured on answers written differently from the catalog.

    .venv/bin/python benchmarks/diagnosis.py [assignment ...]

For every misconception of a catalog (`MISCONCEPTIONS`), its twin (`TWINS`: the same mistake written another way)
runs through every test cell as the grader runs it (run/diagnosis.py, in this process, no kernel), and each
failed test's diagnosis is counted as right (the twin's misconception), wrong (another one) or none. It also
prints how many of the catalog's mistakes (variants that lose points) are misconceptions, named when met. Then each
misconception in turn is taken out of the set the grader matches against and its twin is graded again: any
diagnosis shown then is wrong, and that rate is printed too. Prints one row per assignment.

Aims (issue "Diagnosis"): a shown diagnosis is right at least 95% of the time; at least 70% of the mistakes
(twins) get one.
"""
import os
import sys

os.environ.setdefault("ATTN_COURSE_DEVICE", "cpu")

from attncourse.config import find_root
from attncourse.grading.catalogs import load_catalog, source_notebook, with_code
from attncourse.grading.cells import test_cell_ids
from attncourse.grading.course import assignments
from attncourse.grading.run import diagnosis


def diagnoses(unit, nb, tests):
    """[label named or None] for each test the notebook fails (mistakes that share a label are one misconception)."""
    found = []
    for test in tests:
        passed, returned = diagnosis.run_test(nb, test)
        if not passed:
            named = unit.diagnose(test, returned)
            found.append(named.label if named else None)
    return found


def measure(root, assignment):
    catalog = load_catalog(root, assignment)
    names = getattr(catalog, "MISCONCEPTIONS", {})
    if not names:
        return None
    src = source_notebook(root, assignment, catalog)
    tests = test_cell_ids(src)
    unit = diagnosis.Unit(root, assignment)
    right = wrong = none = mistakes_named = 0
    for vid, cells in catalog.TWINS.items():
        found = diagnoses(unit, with_code(src, cells), tests)
        label = names[vid][0]
        right += sum(f == label for f in found)
        wrong += sum(f not in (label, None) for f in found)
        none += sum(f is None for f in found)
        mistakes_named += label in found
    shown_without = failed_without = 0
    for vid, cells in catalog.TWINS.items():  # without the misconception: every mistake with its label taken out
        unit.misconceptions = {k: v for k, v in names.items() if v[0] != names[vid][0]}
        found = diagnoses(unit, with_code(src, cells), tests)
        shown_without += sum(f is not None for f in found)
        failed_without += len(found)
    unit.misconceptions = names
    shown = right + wrong
    mistakes = [v["id"] for v in catalog.VARIANTS if v["caught_by"]]
    return {"misconceptions": len(names), "catalogued mistakes with a name": f"{len(set(mistakes) & set(names))}/{len(mistakes)}",
            "failed tests": right + wrong + none,
            "right": right, "wrong": wrong, "none": none,
            "shown and right": f"{right / shown:.0%}" if shown else "—",
            "mistakes named": f"{mistakes_named / len(names):.0%}",
            "shown without its entry (all wrong)": f"{shown_without}/{failed_without}"}


def main():
    root = find_root()
    units = sys.argv[1:] or assignments(root)
    rows = {a: measure(root, a) for a in units}
    for a, row in rows.items():
        if row is None:
            print(f"{a}: no MISCONCEPTIONS in its catalog yet")
        else:
            print(f"{a}: " + "，".join(f"{k} {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
