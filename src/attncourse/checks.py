"""Helpers for the test cells of the assignments.

A test cell runs in one of two places:
- in the student's own kernel (Validate, plain `nbgrader autograde`, the author's quick checks): the student's
  functions and classes are ordinary objects, and these helpers act on the caller's globals;
- in the course's grader, outside the student's reach (`attncourse.grading.protocol.trusted`): the student's names are
  proxies to the sandboxed kernel, and these helpers act there.

`using`, `in_kernel` and `forbid` behave the same in both places, so a test cell is written once.
"""
from __future__ import annotations

import contextvars
import sys
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    import torch  # imported where it is used: a test cell that never calls those pays nothing

T = TypeVar("T")

# The grader sets this to its session while it runs a test cell (see attncourse.grading.protocol.trusted).
SESSION: contextvars.ContextVar[Any] = contextvars.ContextVar("attncourse_grading_session", default=None)


class using:
    """`with using(masked_softmax=_ref): ...`: inside the block, the student's code calls `_ref` under that name.

    The reference must be a function defined at the top level of the test cell, using only the notebook's
    imports. It keeps one mistake from costing the points of every later question.
    """

    def __init__(self, **references: Any) -> None:
        self.references = references
        self.caller_globals = sys._getframe(1).f_globals
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> using:
        session = SESSION.get()
        if session is not None:
            session.swap_in(self.references)
            return self
        for name, function in self.references.items():
            self.saved[name] = self.caller_globals.get(name, _MISSING)
            self.caller_globals[name] = function
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        session = SESSION.get()
        if session is not None:
            session.swap_out(list(self.references))
            return False
        for name, value in self.saved.items():
            if value is _MISSING:
                self.caller_globals.pop(name, None)
            else:
                self.caller_globals[name] = value
        return False


_MISSING = object()


def in_kernel(definition: T) -> T:
    """A function or class of the test cell, made to run where the student's code runs.

    Use it for helpers that must touch the student's objects in place (fill a module the student's code
    writes into, run `backward()` through the student's module). Locally it returns `definition` itself.
    """
    session = SESSION.get()
    return definition if session is None else session.define(definition)


def forbid(solution_cell: str, *names: str, reason: str = "") -> None:
    """Fail this test when the student's code calls one of `names` while the test exercises it.

    `solution_cell` names the answer the rule is about: a forbidden call found by any test about it fails every
    test about it (the whole question loses its points). `names` are dotted names as the
    exercise text writes them with the notebook's imports (`"d2l.masked_softmax"`,
    `"F.scaled_dot_product_attention"`, `"nn.MultiheadAttention"`) or keyword arguments (`"enable_gqa="`). The
    grader watches what runs in the kernel from this call to the end of the cell: a call by any name, alias or
    path counts, a call made by the grader's own reference code does not, and the student's self-checks outside
    the answer (run when their cell runs, not during the test) never count. In the student's own kernel this
    check does nothing.
    """
    session = SESSION.get()
    if session is not None:
        session.forbid(solution_cell, names, reason)


Tolerance = tuple[float, float]


def cases(half: Tolerance = (2e-2, 2e-2), bfloat: Tolerance = (8e-2, 8e-2),
          single: Tolerance = (1e-4, 1e-5)) -> list[tuple[torch.device, torch.dtype, float, float]]:
    """[(device, dtype, rtol, atol)] a hidden test runs with: float32, float16 and bfloat16 on the CPU (so the
    half-precision paths run on every grader), and on a machine with a GPU also CUDA float32, float16 and
    bfloat16, with the given (rtol, atol).

    In the grader the device is the grader's (`ATTN_COURSE_DEVICE` in its environment), never the kernel's.
    """
    import torch

    from .device import get_device
    cpu = torch.device("cpu")
    found = [(cpu, torch.float32, *single), (cpu, torch.float16, *half), (cpu, torch.bfloat16, *bfloat)]
    device = get_device()
    if device.type == "cuda":
        found += [(device, torch.float32, *single), (device, torch.float16, *half), (device, torch.bfloat16, *bfloat)]
    return found


def configs(table: tuple[T, ...], device: torch.device, dtype: torch.dtype) -> tuple[T, ...]:
    """The rows of a hidden test's table of shapes and settings that it runs on `device` in `dtype`: every row in
    float32 and on a GPU; on the CPU in float16 and bfloat16 only the first row.

    A half-precision pass on the CPU is there to catch what the dtype changes (a mask or buffer made in float32, a
    fill value that overflows, a cast on return), which the first row shows as well as the others; each pass costs
    as much as the float32 one, and a grader runs it for every student. The catalogs (tests/test_catalog.py) check
    that each catalogued mistake is still caught by exactly the cells it names."""
    import torch
    if device.type == "cpu" and dtype in (torch.float16, torch.bfloat16):
        return table[:1]
    return table


def close(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> bool:
    """`got` (any device and dtype) has `expected`'s shape and matches it within the tolerances, on the CPU."""
    import torch
    got = got.detach().float().cpu()
    return bool(got.shape == expected.shape and torch.allclose(got, expected.float().cpu(), rtol=rtol, atol=atol))


def differences(got: torch.Tensor, expected: torch.Tensor, rtol: float = 0.0, atol: float = 0.0,
                limit: int = 4) -> str:
    """For an assertion message: where `got` differs from `expected` (beyond `rtol`, `atol`), compared on the CPU.

    The first line says how many positions differ (or that the shapes do), so that it reads alone where only a
    message's first lines are shown (Validate); then the first `limit` of them as rows 位置 / 期望 / 实际 aligned in
    columns, each row indented by two spaces (feedback shows such lines in a fixed-width font)."""
    import torch
    got, expected = got.detach().cpu().double(), expected.detach().cpu().double()
    if got.shape != expected.shape:
        return f"形状不同：期望 {tuple(expected.shape)}，实际 {tuple(got.shape)}"
    wrong = (~torch.isclose(got, expected, rtol=rtol, atol=atol)).nonzero().tolist()
    if not wrong:
        return "在这个容差内没有不同的位置"
    columns = [(str(tuple(i)), f"{expected[tuple(i)].item():.4g}", f"{got[tuple(i)].item():.4g}") for i in wrong[:limit]]
    widths = [max(map(len, column)) for column in columns]
    rows = ["  " + label + "".join(f"  {column[row]:>{width}}" for column, width in zip(columns, widths, strict=True))
            for row, label in enumerate(("位置", "期望", "实际"))]
    return "\n".join([f"共 {len(wrong)} 处不同，前 {len(columns)} 处：", *rows])
