"""Reading student and instructor code as syntax trees (comments and strings never count)."""
import ast
import functools
import threading
from collections.abc import Collection
from types import CodeType
from typing import Any

from IPython.core.inputtransformer2 import TransformerManager

_PARSING = threading.Lock()


def parse(source: str) -> ast.Module:
    """`ast.parse`, one thread at a time: CPython 3.11 can raise "AST constructor recursion depth mismatch"
    when threads build or compile syntax trees at once (python/cpython#106905), and the grader runs several
    students. Every syntax tree the grader makes or compiles goes through this module."""
    with _PARSING:
        return ast.parse(source)


def literal(text: str) -> Any:
    """`ast.literal_eval` of `text`, its syntax tree built one thread at a time (see `parse`)."""
    with _PARSING:
        tree = ast.parse(text, mode="eval")
    return ast.literal_eval(tree)


def compile_tree(tree: ast.Module, filename: str) -> CodeType:
    """`compile` of a syntax tree, one thread at a time (see `parse`)."""
    with _PARSING:
        return compile(tree, filename, "exec")


# The trees of the last KEPT_TREES sources up to KEPT_CHARS long are kept (see `python_source`): a tree takes about
# 30 bytes per character of source, so a class that sends many long cells makes the grader keep at most about 60 MB.
KEPT_CHARS, KEPT_TREES = 1 << 13, 256


def python_source(source: str) -> ast.Module | None:
    """Cell source as plain Python (IPython magics become `get_ipython()` calls); None if it does not parse.

    The tree of a source seen before is the same object, which callers only read: the grader reads the same cells
    again and again (the catalogs' cells at every diagnosis, the cells every student was given), and IPython's
    transformation costs more than the parse. A longer source is read afresh each time, so that no tree of a
    huge cell is kept (the longest code cell the released notebooks give every student is 3.1 KiB)."""
    return _kept_source(source) if len(source) <= KEPT_CHARS else _python_source(source)


@functools.lru_cache(maxsize=KEPT_TREES)
def _kept_source(source: str) -> ast.Module | None:
    return _python_source(source)


def _python_source(source: str) -> ast.Module | None:
    try:
        return parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def docstring(source: str) -> str:
    """The leading string literal of a cell ('' if there is none or it does not parse)."""
    try:
        return ast.get_docstring(parse(source)) or ""
    except (SyntaxError, RecursionError, MemoryError):
        return ""


def module_aliases(trees: Collection[ast.AST]) -> dict[str, str]:
    """{local name: dotted module or object path} from every import in `trees`, plus names bound to them
    (`T = torch.Tensor`)."""
    aliases: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                path = dotted(node.value, aliases)
                if path:
                    aliases.setdefault(node.targets[0].id, path)
    return aliases


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`torch.nn.functional.softmax` for `F.softmax` (or `getattr(F, "softmax")`) when the root is an alias."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            parts.append(node.args[1].value)
            node = node.args[0]
        else:
            break
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


def root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def only_imports(source: str) -> bool:
    try:
        body = parse(source).body
    except SyntaxError:
        return False
    return bool(body) and all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)
