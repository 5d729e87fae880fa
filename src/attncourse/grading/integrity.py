"""Signs that a submission tampers with grading. Flagged for a person to review; grades are not changed.

Student code runs in the grading kernel, so it can redefine what the tests compare with, rewrite later
cells through IPython's input transformers, or read `gradebook.db` (which holds the hidden tests).
"""
import re
from pathlib import Path

import nbformat

PATTERNS = [
    (r"input_transformers|ast_transformers|register_magic|set_next_input|\.events\.register",
     "改动了 IPython 的执行机制（可能篡改后续单元格）"),
    (r"(allclose|assert_close|isclose|array_equal|testing\.\w+|\bequal)\s*=(?!=)", "重新定义了比较函数"),
    (r"setattr\s*\(\s*(torch|np|numpy|builtins|math)\b|builtins\.\w+\s*=(?!=)|__builtins__",
     "修改了 torch/numpy/内置函数"),
    (r"gradebook|nbgrader", "访问了评分系统（gradebook/nbgrader）"),
    (r"sys\.modules\s*\[", "替换了已导入的模块"),
]


def flags(notebook_path):
    """Reasons to review a submission by hand ([] if none); an unreadable file has none to give."""
    try:
        nb = nbformat.read(Path(notebook_path), as_version=4)
    except Exception:
        return []
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code"
                     and not c.metadata.get("nbgrader", {}).get("locked"))
    return [reason for pattern, reason in PATTERNS if re.search(pattern, code)]
