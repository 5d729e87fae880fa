"""A call put at the start of a function's own code (CPython 3.11 bytecode), for the witness of forbidden calls.

`report_first(code, call, event, token)` returns `code` with `call(event, token)` run first, before the function's
own first instruction: every call of a function whose `__code__` it becomes reports, from any thread and any
Python path, and no copy of the old code is left for the student's code to reach. The rest of the code is kept
byte for byte: the instructions after the insertion keep their relative jumps, the exception table is moved by
the insertion's length, and every instruction keeps its source position (tracebacks and `inspect` still show the
library's lines). The formats are CPython 3.11's (`Objects/locations.md`, `Objects/exception_handling_notes.txt`);
`tests/test_bytecode.py` checks them on every function of torch.nn.functional, torch.nn and d2l.
"""
import dis
import opcode
import sys
import types
from typing import Any

if sys.version_info[:2] != (3, 11):  # a witness that cannot watch must not start (the grader then stops)
    raise ImportError(f"bytecode.py writes CPython 3.11 bytecode, not {sys.version.split()[0]}'s")

_OPS = opcode.opmap
_CACHES: list[int] = opcode._inline_cache_entries  # type: ignore[attr-defined]


def _instruction(name: str, arg: int = 0) -> list[int]:
    """One instruction (after EXTENDED_ARG where `arg` needs it) and its inline cache entries, as bytes."""
    code = _OPS[name]
    out = [_OPS["EXTENDED_ARG"], arg >> 8] if arg > 255 else []
    return out + [code, arg & 255] + [0, 0] * _CACHES[code]


def _varint_high_first(value: int, first: int) -> list[int]:
    """The exception table's numbers: 6 bits a byte, most significant first, bit 6 = more follow; `first` (bit 7)
    marks an entry's first byte."""
    chunks = [value & 63]
    while value >= 64:
        value >>= 6
        chunks.append(value & 63)
    chunks.reverse()
    out = [chunk | (64 if i < len(chunks) - 1 else 0) for i, chunk in enumerate(chunks)]
    out[0] |= first
    return out


def _varint_low_first(value: int) -> list[int]:
    """The location table's numbers: 6 bits a byte, least significant first, bit 6 = more follow."""
    out = []
    while value >= 64:
        out.append((value & 63) | 64)
        value >>= 6
    return out + [value]


def exception_table(code: types.CodeType, at: int, shift: int) -> bytes:
    """`code`'s exception table with every offset from code unit `at` on moved by `shift` units."""
    out: list[int] = []
    for entry in dis._parse_exception_table(code):  # type: ignore[attr-defined]
        start, end, target = entry.start // 2, entry.end // 2, entry.target // 2
        start, end = start + shift * (start >= at), end + shift * (end > at)
        out += (_varint_high_first(start, 128) + _varint_high_first(end - start, 0)
                + _varint_high_first(target + shift * (target >= at), 0)
                + _varint_high_first(entry.depth << 1 | entry.lasti, 0))
    return bytes(out)


def location_table(first_line: int, positions: list[tuple[Any, Any, Any, Any]]) -> bytes:
    """A location table giving code unit i the source position `positions[i]` (line, end line, column, end
    column; None where unknown), written in the long form, lines counted from `first_line`."""
    out: list[int] = []
    line, i = first_line, 0
    while i < len(positions):
        run = 1
        while run < 8 and i + run < len(positions) and positions[i + run] == positions[i]:
            run += 1
        start, end, column, end_column = positions[i]
        if start is None:
            out.append(0x80 | 15 << 3 | run - 1)  # no location
        else:
            delta = start - line
            out.append(0x80 | 14 << 3 | run - 1)
            out += _varint_low_first(-delta << 1 | 1 if delta < 0 else delta << 1)
            out += _varint_low_first((start if end is None else end) - start)
            out += _varint_low_first(0 if column is None else column + 1)
            out += _varint_low_first(0 if end_column is None else end_column + 1)
            line = start
        i += run
    return bytes(out)


def report_first(code: types.CodeType, call: Any, event: str, token: int, first_line: int | None = None) -> types.CodeType:
    """`code` running `call(event, token)` right after its RESUME (generators: at their first `next`). With
    `first_line`, the code also says it starts at that line (every instruction keeps its own line): `inspect`
    then finds no source for it, so compilers that read the source (TorchScript) cannot copy it."""
    raw = code.co_code
    at = next(i for i in range(0, len(raw), 2) if raw[i] == _OPS["RESUME"]) // 2 + 1
    for ins in dis.get_instructions(code):
        if ins.opcode in opcode.hasjrel and ins.argval // 2 < at <= ins.offset // 2:
            raise ValueError(f"{code.co_qualname}: a jump back to the function's first instruction")
    n = len(code.co_consts)
    prefix = bytes(_instruction("PUSH_NULL") + _instruction("LOAD_CONST", n) + _instruction("LOAD_CONST", n + 1)
                   + _instruction("LOAD_CONST", n + 2) + _instruction("PRECALL", 2) + _instruction("CALL", 2)
                   + _instruction("POP_TOP"))
    positions = list(code.co_positions())
    positions[at:at] = [positions[at - 1]] * (len(prefix) // 2)  # the inserted call is on the `def` line
    line = code.co_firstlineno if first_line is None else first_line
    return code.replace(co_code=raw[:2 * at] + prefix + raw[2 * at:], co_consts=(*code.co_consts, call, event, token),
                        co_stacksize=max(code.co_stacksize, 4), co_firstlineno=line,
                        co_linetable=location_table(line, positions),
                        co_exceptiontable=exception_table(code, at, len(prefix) // 2))
