"""The package's layout is the path of a submission: imports only go down it, and nothing imports in a circle.

Read from the source with `ast` (every import, also inside functions). The stages of `attncourse.grading`, in
the order a submission passes through them, are listed in `grading/__init__.py`. A unit's catalog
(`catalog/<assignment>.py`) is loaded through `importlib` by the shared `grading.catalogs` (for the grader's
diagnosis and the authoring tools): the graph has that edge, so a catalog may import only shared modules.
"""
import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "attncourse"
# Rank of each part of attncourse.grading: a module may import only modules of its own rank or lower.
RANKS = {"shared": 0, "release": 1, "intake": 2, "isolation": 3, "protocol": 4, "run": 5, "publish": 6,
         "commands": 7, "authoring": 8}
SHARED = {"model", "cells", "catalogs", "deck_code", "syntax", "course", "records", "gradebook_engines", "files", "logs", "safe_html", "text",
          "review_banner"}


def module_files() -> dict:
    """{dotted module name: path} of every module of attncourse."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known) -> set:
    """The attncourse modules that module `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in found if m in known and m != name}


LOADER = "attncourse.grading.catalogs"  # load_catalog: importlib.util.spec_from_file_location


def unit_catalogs() -> dict:
    """{catalog.<assignment>: path} of the units' catalogs (the assignments in source/)."""
    units = {p.name for p in (ROOT / "source").iterdir() if p.is_dir()}
    return {f"catalog.{p.stem}": p for p in sorted((ROOT / "catalog").glob("*.py")) if p.stem in units}


def graph() -> dict:
    known = module_files()
    edges = {name: imports(name, path, known) for name, path in known.items()}
    catalogs = unit_catalogs()
    edges.update({name: imports(name, path, known) for name, path in catalogs.items()})
    edges[LOADER] = edges[LOADER] | set(catalogs)
    return edges


def rank(module: str) -> int | None:
    """The stage rank of a grading module; None outside attncourse.grading. cli is above everything, the other
    top-level modules (plotting, slides, ...) below grading; a unit's catalog is loaded by a shared module."""
    parts = module.split(".")
    if parts[0] == "catalog":
        return RANKS["shared"]
    if parts[:2] != ["attncourse", "grading"]:
        return 99 if module == "attncourse.cli" else -1
    if len(parts) == 2 or parts[2] in SHARED:
        return RANKS["shared"]
    return RANKS[parts[2]]


def upward_imports(edges: dict) -> list:
    return [f"{a} imports {b}" for a, targets in edges.items() for b in targets if rank(b) > rank(a)]


def cycles(edges: dict) -> list:
    """Each import circle once, as a list of modules."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_the_graph_is_read():
    edges = graph()
    assert unit_catalogs() and set(unit_catalogs()) <= edges[LOADER]
    assert "attncourse.grading.deck_code" in edges["catalog.a1_scoring"]  # deck_definitions
    assert "attncourse.grading.run.autograde" in edges
    assert "attncourse.grading.protocol.remote" in edges["attncourse.grading.run.execution"]
    assert "attncourse.grading.syntax" in edges["attncourse.grading.protocol.trusted"]  # `from .. import syntax`


def test_every_grading_module_belongs_to_a_stage():
    for module in graph():
        if module.startswith("attncourse.grading."):
            assert rank(module) in RANKS.values(), module


def test_imports_only_go_down_the_path():
    assert upward_imports(graph()) == []


def test_no_import_circle():
    assert cycles(graph()) == []


@pytest.mark.parametrize("edge", [("attncourse.grading.intake.staging", "attncourse.grading.run.autograde"),
                                  ("attncourse.grading.cells", "attncourse.grading.commands"),
                                  ("attncourse.slides", "attncourse.grading.run.execution"),
                                  ("catalog.a1_scoring", "attncourse.grading.authoring.variants")])
def test_the_checks_can_fail(edge):
    edges = graph()
    edges[edge[0]] = edges[edge[0]] | {edge[1]}
    assert upward_imports(edges) == [f"{edge[0]} imports {edge[1]}"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_each_stage_says_what_comes_in_and_goes_out():
    for stage in RANKS:
        init = PACKAGE / "grading" / stage / "__init__.py"
        if stage not in ("shared", "commands"):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            assert " in," in doc and "out," in doc, f"{init}: the docstring should say what comes in and goes out"



def stage(module: str) -> str:
    """The stage folder of a grading module ('' for anything else)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["attncourse", "grading"] and len(parts) > 3 else ""


def test_publish_stands_beside_run():
    """publish/ reads what grading left (records, the gradebook, autograded notebooks) through the shared
    modules, never run/'s own code, and run/ never imports publish/."""
    edges = graph()
    assert any(stage(a) == "publish" for a in edges) and any(stage(a) == "run" for a in edges)
    crossing = [f"{a} imports {b}" for a, targets in edges.items() for b in targets
                if {stage(a), stage(b)} == {"publish", "run"}]
    assert crossing == []


def test_the_grader_builds_syntax_trees_only_through_syntax():
    """CPython 3.11 raises a spurious SystemError when threads build or compile syntax trees at once (it once cost
    an honest answer a cell in a full run here): the grader, which grades students in threads, parses through
    `grading.syntax`, one thread at a time (a syntax tree is compiled there too). The kernel's side
    (`protocol/probe.py`, `witness.py`) runs alone."""
    found = []
    for name, path in module_files().items():
        if not name.startswith("attncourse.grading.") or name.endswith((".syntax", ".probe", ".witness")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ast" \
                    and node.attr in ("parse", "literal_eval"):
                found.append(f"{name}:{node.lineno}")
    assert found == [], found
