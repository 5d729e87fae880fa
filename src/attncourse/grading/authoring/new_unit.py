"""`course new-unit <id>`: the skeleton of a new unit, following the pattern of the existing ones.

It writes a source notebook with nbgrader metadata (a locked import cell, one answer cell, one test cell with
the visible-check pattern and a hidden part, one written answer), the unit's catalog, and a deck stub. The
skeleton releases and its own tests pass; the catalog schema test then lists what the author still owes
(the lecturer's code, the deck's code, at least eight mistakes). Nothing is overwritten.
"""
import os
import re
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from ...notebooks import DECKS, KERNELSPEC, TITLE_TAG, decks, tidy
from ..course import catalog_path, folders

UNIT_ID = re.compile(r"^a\d+_[a-z][a-z0-9_]*$")
IMPORTS = "import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\nfrom d2l import torch as d2l"


def _meta(grade_id: str, **kw: Any) -> dict[str, Any]:
    return {"nbgrader": {"schema_version": 3, "grade_id": grade_id, "locked": False, "solution": False,
                         "grade": False, **kw}, "slideshow": {"slide_type": "-"}}


def _title(text: str) -> NotebookNode:
    cell: NotebookNode = new_markdown_cell(f"<h1>{text}</h1>",
                                           metadata={"tags": [TITLE_TAG], "slideshow": {"slide_type": "slide"}})
    return cell


def source_notebook(title: str, deck_name: str) -> NotebookNode:
    """The assignment's source: one exercise in the course's pattern, with comments for the author."""
    nb: NotebookNode = new_notebook(cells=[
        _title(f"作业：{title}"),
        new_markdown_cell(f"## 作业说明\n\n本作业对应讲义《{title}》（`notebooks/{deck_name}.ipynb`）。\n\n"
                          "| 部分 | 内容 | 分值 |\n|---|---|---|\n| 1 | `scale_scores`（示例题，请换成本单元的题目） | 2 |\n"
                          "| 2 | 书面题 | 1 |\n\n把题目说清楚：测试检查的每一个行为都要写进题目；题目没有规定的，测试不检查。",
                          metadata={"slideshow": {"slide_type": "slide"}}),
        new_code_cell(IMPORTS, metadata=_meta("imports", locked=True)),
        new_markdown_cell("## 1. 示例题\n\n实现 `scale_scores(scores, d)`：返回 `scores / math.sqrt(d)`，形状不变。",
                          metadata={"slideshow": {"slide_type": "slide"}}),
        new_code_cell("# 实现 scale_scores(scores, d)。\n### BEGIN SOLUTION\ndef scale_scores(scores, d):\n"
                      "    return scores / math.sqrt(d)\n### END SOLUTION",
                      metadata=_meta("scale_scores", solution=True)),
        new_code_cell(
            '"""scale_scores：形状不变，数值等于 scores / sqrt(d)。\n'
            '可见部分：一个小例子；隐藏部分：其他形状与 d，与公式逐元素比较。"""\n'
            "# 可见检查：固定的小输入（用显式的 torch.Generator，不用全局随机数），中文断言信息。\n"
            "X = torch.rand(2, 3, generator=torch.Generator().manual_seed(0))\n"
            "out = scale_scores(X.clone(), 4)\n"
            'assert out.shape == X.shape, f"形状应为 {tuple(X.shape)}，实际为 {tuple(out.shape)}"\n'
            'assert torch.allclose(out, X / 2), "d = 4 时结果应为 scores / 2"\n'
            "### BEGIN HIDDEN TESTS\n"
            "# 隐藏检查：与测试时计算的参考结果比较（不要粘贴数组）；checks.cases 给出设备与容差。\n"
            "from attncourse.checks import cases, close\n\n"
            "g = torch.Generator().manual_seed(1)\n"
            "for device, dtype, rtol, atol in cases():\n"
            "    for shape, d in (((4, 5, 6), 8), ((1, 7), 3)):\n"
            "        S = torch.randn(*shape, generator=g)\n"
            "        got = scale_scores(S.to(device, dtype), d)\n"
            '        assert close(got, S / math.sqrt(d), rtol, atol), f"形状 {shape}、d={d} 时数值不对"\n'
            "### END HIDDEN TESTS",
            metadata=_meta("test_scale_scores", grade=True, locked=True, points=2)),
        new_markdown_cell("## 2. 书面题\n\n为什么要除以 $\\sqrt d$？用一两句话回答。",
                          metadata={"slideshow": {"slide_type": "slide"}}),
        new_markdown_cell("=== BEGIN MARK SCHEME ===\n评分要点：方差论证（1 分）。\n=== END MARK SCHEME ===",
                          metadata=_meta("why_scale", grade=True, solution=True, points=1)),
    ], metadata={"kernelspec": dict(KERNELSPEC)})
    return nb


def catalog_text(unit: str, notebook: str, deck_name: str) -> str:
    return f'''"""Catalog of assignment {unit}.

LECTURER: the lecturer's own code for every answer cell, verbatim (it must earn full marks).
ALSO_CORRECT["deck"]: the code the deck teaches, read from the deck (add the deck's names below).
VARIANTS: at least eight realistic mistakes, each with the exact test cells that must lose points; every
hidden test needs a mistake that only it catches. `python -m attncourse.grading.authoring.quickcheck {unit}`
grades them; `pytest tests/test_catalog_schema.py -k {unit}` checks the shape in seconds.
"""
from attncourse.grading.deck_code import deck_definitions

NOTEBOOK = "{notebook}"

LECTURER = {{}}  # {{answer grade_id: the lecturer's code}}

ALSO_CORRECT = {{}}
_DECK = deck_definitions(__file__, "notebooks/{deck_name}.ipynb", {{}})  # {{name defined in the deck: grade_id}}
if _DECK:
    ALSO_CORRECT["deck"] = _DECK

VARIANTS = [
    # {{"id": "no_sqrt", "mistake": "除以 d 而不是 sqrt(d)", "caught_by": {{"test_scale_scores"}},
    #  "edits": {{"scale_scores": [("math.sqrt(d)", "d")]}}}},
]
'''


def deck_notebook(title: str) -> NotebookNode:
    nb: NotebookNode = new_notebook(cells=[
        _title(title),
        new_markdown_cell("## 准备", metadata={"slideshow": {"slide_type": "slide"}}),
        new_code_cell("import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
                      "from d2l import torch as d2l\nimport attncourse", metadata={"slideshow": {"slide_type": "-"}}),
        new_markdown_cell("## 第一页\n\n一个想法一页，代码紧跟其后。", metadata={"slideshow": {"slide_type": "slide"}}),
        new_markdown_cell("## 参考文献\n\n1. ……", metadata={"slideshow": {"slide_type": "slide"}}),
    ], metadata={"kernelspec": dict(KERNELSPEC)})
    return nb


def create(root: str | os.PathLike[str], unit: str, title: str, notebook: str | None = None,
           deck: str | None = None) -> list[Path]:
    """Write the skeleton of unit `unit` (e.g. `a4_window`); returns the files written."""
    root = Path(root)
    if not UNIT_ID.match(unit):
        raise ValueError(f"单元编号 {unit!r} 应形如 a4_window（a + 数字 + 下划线 + 小写英文）")
    notebook = notebook or unit.split("_", 1)[1]
    deck = deck or f"{len(decks(root)) + 1:02d}_{notebook}"
    files = {folders(root).source(unit) / f"{notebook}.ipynb": source_notebook(title, deck),
             root / DECKS / f"{deck}.ipynb": deck_notebook(title),
             catalog_path(root, unit): catalog_text(unit, notebook, deck)}
    existing = [str(p.relative_to(root)) for p in files if p.exists()]
    if existing:
        raise ValueError(f"已存在，不会覆盖：{'、'.join(existing)}")
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            nbformat.write(content, path)
            tidy(path, root=root)
    return list(files)
