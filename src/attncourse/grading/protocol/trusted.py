"""Running a test cell in the grader, against a student's kernel, and deciding its verdict here.

The cell's source comes from the gradebook (visible and hidden parts), never from the submission. Its free
names are looked up in the kernel and bound to data or proxies (see `remote.py`); the notebook's import cell
is run here, so `torch`, `F`, `math` are the grader's own. The verdict is whatever this interpreter sees: the
cell ran to the end, or it raised. Nothing the kernel sends is executed, and the kernel never sees the cell.
"""
import ast
import builtins
import functools
from collections.abc import Iterable
from types import CodeType
from typing import Any

from ... import checks
from .. import syntax, text
from . import wire
from .probe import GRADER_FILE
from .remote import KernelLost, KernelTimeout, Session, StudentError

BUILTINS = set(dir(builtins))


class Verdict:
    def __init__(self, passed: bool, message: str = "") -> None:
        self.passed, self.message = passed, text.cap(message, 2000)  # it may quote what the student's code sent


@functools.lru_cache(maxsize=256)  # a test cell is the same for every student
def free_names(source: str) -> frozenset[str]:
    """Names a cell reads but never binds, minus builtins: what must come from the student's kernel."""
    tree = syntax.parse(source)
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return frozenset(loaded - bound - BUILTINS)


@functools.lru_cache(maxsize=256)
def _compiled(source: str, grade_id: str) -> CodeType:
    return compile(source, f"{GRADER_FILE}{grade_id}>", "exec")


def base_namespace(import_sources: Iterable[str]) -> dict[str, Any]:
    """The grader's own modules under the names the notebook's import cells give them."""
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "attncourse_test_cell"}
    for source in import_sources:
        exec(compile(source, "<imports>", "exec"), namespace)  # noqa: S102 - the instructor's import cell
    return namespace


def describe_student_error(exc: StudentError) -> str:
    where = exc.where if isinstance(exc.where, list) and len(exc.where) == 3 else None
    place = f"（在 {where[0]} 中，第 {where[1]} 行：{where[2]}）" if where else ""
    if exc.ename == "NotImplementedError":
        return "仍有未完成的函数（NotImplementedError）"
    return f"你的代码抛出了 {exc.ename}: {exc.evalue}{place}"


def run_test_cell(source: str, grade_id: str, namespace: dict[str, Any], session: Session) -> Verdict:
    """Run one test cell; returns a Verdict. KernelLost propagates: the submission cannot be graded."""
    session.cell_source = source
    token = checks.SESSION.set(session)
    try:
        cell_ns = {**namespace, **session.start_cell(grade_id, free_names(source) - set(namespace))}
        try:
            exec(_compiled(source, grade_id), cell_ns)  # noqa: S102 - the instructor's test cell
            verdict = Verdict(True)
        except AssertionError as exc:
            verdict = Verdict(False, str(exc).strip() or "结果与预期不符")
        except StudentError as exc:
            verdict = Verdict(False, describe_student_error(exc))
        forbidden = session.forbidden_message()  # a forbidden call fails the cell, whatever else happened
        return Verdict(False, forbidden) if forbidden else verdict
    except KernelTimeout:
        return Verdict(False, "运行超时：代码可能陷入了死循环或过慢")
    except (wire.WireError, RecursionError) as exc:
        session.tampered.append(f"{grade_id}：{exc}")
        return Verdict(False, f"无法读取你的代码返回的结果：{text.cap(exc, 200)}")
    except KernelLost:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. the student's function returned a list where a tensor was expected
        return Verdict(False, f"{type(exc).__name__}: {str(exc)[:500]}")
    finally:
        checks.SESSION.reset(token)
        try:
            session.end_cell()
        except KernelLost:
            raise
        except Exception:  # noqa: BLE001 - whatever the kernel sent back, the verdict above stands
            pass
