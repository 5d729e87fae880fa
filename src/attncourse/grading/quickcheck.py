"""Fast check of a catalog without nbgrader: execute each variant, see which test cells raise.

It runs the *source* notebook (hidden tests included) in a plain kernel. The real proof is the
autograding test in `tests/`; this is the author's quick loop: `python -m attncourse.grading.quickcheck a1_scoring`.
"""
import sys
import time

from nbclient import NotebookClient

from ..config import find_root
from .variants import load_catalog, source_notebook, test_cell_ids, variant_notebook, with_code


def failing_tests(nb, timeout=60):
    """Execute `nb` (errors allowed) and return the test grade_ids whose cell raised."""
    NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": "."}}).execute()
    tests = set(test_cell_ids(nb))
    return {c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id") in tests
            and any(o.output_type == "error" for o in c.get("outputs", []))}


def main(assignment):
    root = find_root()
    catalog = load_catalog(root, assignment)
    src = source_notebook(root, assignment, catalog)
    cases = [("source", src, set()), ("lecturer", with_code(src, catalog.LECTURER), set())]
    cases += [(v["id"], variant_notebook(src, v), set(v["caught_by"])) for v in catalog.VARIANTS
              if not v.get("needs_cuda")]
    bad = 0
    for name, nb, expected in cases:
        start = time.time()
        got = failing_tests(nb)
        ok = got == expected
        bad += not ok
        print(f"{'OK ' if ok else 'BAD'} {name:32s} {time.time() - start:5.1f}s failed={sorted(got)}"
              + ("" if ok else f" expected={sorted(expected)}"), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
