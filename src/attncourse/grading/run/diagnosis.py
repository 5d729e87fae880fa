"""Naming the likely mistake behind a failed test: the catalogued misconception whose code, run through the
same test, gives back what the student's code gave back.

A catalog names some of its variants in `MISCONCEPTIONS`: {variant id: (label, hint, slide title of `DECK`[,
another deck])}. While a test cell runs, the grader keeps every tensor the student's code returns to it
(`Session.returned`). When the cell fails, the grader runs, in this process, the source notebook with a
misconception's answer in place of the reference (the instructor's code, never the student's) up to that cell, then
the cell itself through the same protocol (`probe.serving`). A catalogued mistake matches when the cell fails there
too and the student's code returned the same tensors: as many (at least one), each with the same shape and dtype
and values within a tolerance for its dtype. A misconception is named only when it is the one thing that matches
(mistakes that share a label are one misconception): if another catalogued mistake returns the same, or none does,
nothing is shown. A passed test is never diagnosed.
"""
import builtins
import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

from nbformat import NotebookNode

from .. import course, syntax
from ..catalogs import load_catalog, source_notebook, with_code
from ..cells import grade_id, is_test_cell
from ..protocol import probe, remote, trusted
from ..syntax import only_imports, python_source


@dataclass(frozen=True)
class Diagnosis:
    variant: str
    label: str
    hint: str
    slide: str
    deck: str

    def text(self) -> str:
        return f"可能的原因：{self.label}。{self.hint}（讲义 {self.deck}，“{self.slide}”一页）"


_LOCK = threading.Lock()  # one Unit per catalog


class _SharedRandom:
    """torch's global random generator, which this process's threads share. Test cells draw from it (a module
    the test builds in the grader); a catalogued answer's run seeds it and must draw the same numbers every time
    it runs, so it has the generator alone: test cells share it (`drawing`), one run at a time takes it `alone`
    once the test cells under way have finished (new ones wait)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._drawing = self._waiting = 0
        self._alone = False

    @contextmanager
    def drawing(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: not self._alone and not self._waiting)
            self._drawing += 1
        try:
            yield
        finally:
            with self._changed:
                self._drawing -= 1
                self._changed.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        with self._changed:
            self._waiting += 1
            self._changed.wait_for(lambda: not self._alone and not self._drawing)
            self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._changed:
                self._alone = False
                self._changed.notify_all()


RANDOM = _SharedRandom()
_UNITS: dict[tuple[str, int], "Unit | None"] = {}  # (catalog path, its mtime) -> Unit


class Unit:
    """One assignment's misconceptions and what their code returns to each test, computed once per process."""

    def __init__(self, root: str | Path, assignment: str) -> None:
        catalog = load_catalog(root, assignment)
        self.source = source_notebook(root, assignment, catalog)
        self.deck = Path(getattr(catalog, "DECK", "")).stem
        self.misconceptions = getattr(catalog, "MISCONCEPTIONS", {})
        self.variants = [v for v in catalog.VARIANTS if not v.get("needs_cuda")] if self.misconceptions else []
        self._runs: dict[tuple[str, str], tuple[bool, list[Any]]] = {}
        self._notebooks: dict[str, NotebookNode] = {}  # variant id -> the source notebook with its code (read only)

    def diagnose(self, test: str, returned: list[Any]) -> Diagnosis | None:
        """The misconception behind failed test `test` whose code returns `returned` (the student's), or None."""
        if not returned or len(returned) >= remote.MAX_RETURNED:
            return None  # nothing came back before the failure (or too much to compare): nothing to match
        caught = [v for v in self.variants if test in v["caught_by"]]
        matching = [v for v in caught if v["id"] in self.misconceptions and self._matches(v, test, returned)]
        if not matching:
            return None
        if len({self.misconceptions[v["id"]][0] for v in matching}) != 1 or any(
                self._matches(v, test, returned) for v in caught if v["id"] not in self.misconceptions):
            return None  # mistakes this test cannot tell apart (another misconception, a shortcut, a crash)
        variant = matching[0]["id"]
        label, hint, slide, *deck = self.misconceptions[variant]
        return Diagnosis(variant, label, hint, slide, Path(deck[0]).stem if deck else self.deck)

    def _matches(self, variant: dict[str, Any], test: str, returned: list[Any]) -> bool:
        passed, theirs = self._run(variant, test)
        return not passed and _same(returned, theirs)

    def _run(self, variant: dict[str, Any], test: str) -> tuple[bool, list[Any]]:
        key = (variant["id"], test)
        if key not in self._runs:
            with RANDOM.alone():  # one run at a time: another thread's may have just made this one
                if key not in self._runs:
                    if variant["id"] not in self._notebooks:
                        self._notebooks[variant["id"]] = with_code(self.source, variant.get("cells"), variant.get("edits"))
                    self._runs[key] = run_test(self._notebooks[variant["id"]], test)
        return self._runs[key]


def catalog_path(root: str | Path, assignment: str) -> Path:
    return course.catalog_path(root, assignment)


UNAVAILABLE = "提示：本作业的错误目录（catalog/）无法读取，反馈中不会给出“可能的原因”"


def unit(root: str | Path, assignment: str) -> Unit | None:
    """The assignment's Unit; None when the course has no catalog for it or the catalog cannot be read (a
    diagnosis is a hint: it never stops grading)."""
    path = catalog_path(root, assignment)
    if not path.is_file():
        return None
    key = (str(path), path.stat().st_mtime_ns)
    with _LOCK:
        if key not in _UNITS:
            try:
                _UNITS[key] = Unit(root, assignment)
            except Exception:  # noqa: BLE001 - the instructor's catalog is broken: grade without diagnoses
                _UNITS[key] = None
        return _UNITS[key]


def preparation(root: str | Path, assignments: Iterable[str]) -> Iterator[Callable[[], object]]:
    """Steps that run, ahead of any failed test, what diagnosing a failed test of `assignments` runs: for each
    test, the catalogued misconceptions it catches, one (misconception, test) at a time, taking the assignments in
    turn. A grading run does them while it waits for its preloading process (`preload.Zygote.wait`), so that its
    graders find them done."""
    def step(found: Unit, variant: dict[str, Any], test: str) -> None:
        try:
            found._run(variant, test)
        except Exception:  # noqa: BLE001 - a diagnosis is a hint: the same run fails again when a test asks for it
            pass

    per_assignment = []
    for assignment in assignments:
        found = unit(root, assignment)
        if found is not None:
            per_assignment.append([functools.partial(step, found, v, test) for v in found.variants
                                   if v["id"] in found.misconceptions for test in v["caught_by"]])
    for steps in itertools.zip_longest(*per_assignment):
        yield from (s for s in steps if s is not None)


def run_test(nb: NotebookNode, test: str) -> tuple[bool, list[Any]]:
    """(passed, returned) of test cell `test` of the instructor's notebook `nb`, run here as the grader runs it:
    the code cells before it run top to bottom in a namespace of their own (the "kernel"), then the test cell
    through the protocol against that namespace."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins, "print": lambda *a, **k: None}
    imports: list[str] = []
    source = None
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if grade_id(cell) == test:
            source = cell.source
            break
        if is_test_cell(cell):
            continue
        imported, code = _cell_code(cell.source, grade_id(cell) or "cell")
        if imported:
            imports.append(cell.source)
        if code is None:  # a cell that does not parse cannot run
            continue
        try:
            exec(code, namespace)  # noqa: S102 - the instructor's code
        except Exception:  # noqa: BLE001 - e.g. an experiment that needs a GPU: the test says what it lacks
            pass
    if source is None:
        return True, []

    session = remote.Session(remote.serve_here, imports)  # no witness key: shortcuts are not misconceptions
    with probe.serving(namespace):
        verdict = trusted.run_test_cell(source, test, trusted.base_namespace(imports), session)
    return verdict.passed, session.returned


@functools.lru_cache(maxsize=1024)  # a catalog's cells run again for every test they come before
def _cell_code(source: str, name: str) -> tuple[bool, CodeType | None]:
    """(whether it only imports, its code or None where it does not parse) of a cell of the instructor's."""
    tree = python_source(source)
    return only_imports(source), None if tree is None else syntax.compile_tree(tree, name)


# the tolerance for a tensor of each dtype: two ways of writing the same mistake round differently
TOLERANCE = {"float16": (1e-2, 1e-3), "bfloat16": (5e-2, 1e-2)}
DEFAULT_TOLERANCE = (1e-3, 1e-5)


def _same(mine: list[Any], theirs: list[Any]) -> bool:
    if len(mine) != len(theirs):
        return False
    import torch
    for a, b in zip(mine, theirs, strict=True):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if not a.is_floating_point():
            if not torch.equal(a.cpu(), b.cpu()):
                return False
            continue
        rtol, atol = TOLERANCE.get(str(a.dtype).removeprefix("torch."), DEFAULT_TOLERANCE)
        if not torch.allclose(a.float().cpu(), b.float().cpu(), rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True
