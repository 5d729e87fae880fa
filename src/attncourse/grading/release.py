"""Student versions: nbgrader's generate_assignment, then a check that nothing secret leaked."""
import re
from pathlib import Path

import nbformat
from nbgrader.converters import GenerateAssignment

from .course import coursedir

REGION = re.compile(r"(BEGIN SOLUTION|BEGIN HIDDEN TESTS)(.*?)(END SOLUTION|END HIDDEN TESTS)", re.S)
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


class LeakError(Exception):
    """A student version contains solution code, hidden tests or a sample answer."""


def generate(cfg, assignment):
    """Write `release/<assignment>/` and record the assignment in the gradebook."""
    converter = GenerateAssignment(coursedir=coursedir(cfg, assignment), config=cfg)
    converter.force = True
    converter.create_assignment = True
    converter.start()


def secret_lines(nb, hidden_only=False):
    """Distinctive lines that only occur inside solution or hidden-test regions (and sample answers).

    `hidden_only`: just the hidden tests' lines (a student's feedback may show the student's own code).
    """
    secret, public = set(), set()
    for cell in nb.cells:
        text = cell.source
        if hidden_only:
            text = "\n".join(m.group(0) for m in REGION.finditer(text) if m.group(1) == "BEGIN HIDDEN TESTS")
        elif not REGION.search(text) and cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("solution"):
            secret.update(line.strip() for line in text.splitlines())  # nbgrader replaces the whole answer
            continue
        secret.update(line.strip() for m in REGION.finditer(text) for line in m.group(2).splitlines())
        public.update(line.strip() for line in REGION.sub("", text).splitlines())
    return {line for line in secret - public if len(line) >= 12 and line.strip("#").strip()}


def check_release(source_nb_path, release_nb_path):
    """Raise LeakError naming what a student version gives away."""
    source = nbformat.read(source_nb_path, as_version=4)
    released = nbformat.read(release_nb_path, as_version=4)
    text = "\n".join(cell.source for cell in released.cells)
    problems = [f"marker '{m}'" for m in MARKERS if m in text]
    lines = {line.strip() for line in text.splitlines()}
    problems += [f"line from a solution or hidden test: {line!r}" for line in sorted(secret_lines(source) & lines)]
    if problems:
        raise LeakError(f"{release_nb_path}: " + "; ".join(problems[:10]))


def release_all(cfg, root, assignment_ids):
    """Regenerate every student version and check it; returns the checked notebook paths."""
    checked = []
    for aid in assignment_ids:
        generate(cfg, aid)
        for src in sorted((Path(root) / "source" / aid).glob("*.ipynb")):
            rel = Path(root) / "release" / aid / src.name
            if not rel.exists():
                raise LeakError(f"{rel} was not generated")
            check_release(src, rel)
            checked.append(rel)
    return checked
