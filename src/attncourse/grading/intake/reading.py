"""Reading a student's notebook file as the editors that wrote it meant it, not as a strict validator would.

JupyterLab, classic Notebook, VS Code, PyCharm and Colab all write files Jupyter opens, but not all of them are
valid nbformat: a UTF-8 byte-order mark (Windows tools), a `transient` key in outputs (VS Code), outputs on
markdown cells, cells without metadata, old minor versions (Colab's 4.0). Each known quirk is repaired with a
note; a file that still does not validate is rebuilt from its cells. Only a file that is not a notebook at all is
refused, with the reason.

Outputs are not graded (the grader runs the notebook again) and do not count against the size limit: what is kept
of them is the student's own run of each code cell, trimmed (`SUBMITTED_OUTPUTS` in the cell's metadata), for
the TA who reads the written answers.
"""
import codecs
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ijson
import nbformat
from nbformat import NotebookNode

from ..safe_html import repair_pasted_images

MAX_FILE_BYTES = 200 << 20  # a file larger than this is not read at all
MAX_NOTEBOOK_BYTES = 20 << 20  # the notebook without its outputs: what is graded
SUBMITTED_OUTPUTS = "course_submitted_outputs"  # cell metadata: the student's own outputs, trimmed
MAX_KEPT_TEXT = 20_000  # characters of the student's text output kept per cell
MAX_KEPT_IMAGE = 300_000  # bytes (base64) of one PNG kept
MAX_KEPT_TOTAL = 3_000_000  # bytes of the student's outputs kept per notebook
MAX_OUTPUT_STRINGS = 100_000  # strings (lines) of one field of an output read; the rest is skipped unread


def utf8(data: bytes) -> tuple[bytes, list[str]]:
    """A notebook file as UTF-8 and what was repaired: a UTF-8 BOM dropped, or GBK read when not UTF-8."""
    notes = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        notes.append("去掉了文件开头的 BOM（Windows 工具常加）")
    try:
        check = codecs.getincrementaldecoder("utf-8")()  # checked a megabyte at a time, not kept
        for start in range(0, len(data), 1 << 20):
            check.decode(memoryview(data)[start:start + (1 << 20)])
        check.decode(b"", final=True)
        return data, notes
    except UnicodeDecodeError:
        return data.decode("gbk").encode(), notes + ["文件不是 UTF-8 编码，按 GBK 读取"]


def _load(data: bytes) -> Any:
    """The JSON of a notebook file, built as it is read, except each output's strings past what a TA could be
    shown (`MAX_KEPT_IMAGE` characters, `MAX_OUTPUT_STRINGS` strings per field): a saved flood, millions of lines,
    is never built in memory. Raises ijson.JSONError."""
    builder = ijson.ObjectBuilder()
    read: dict[str, list[int]] = {}  # characters and strings read so far per field of the current output
    for prefix, event, value in ijson.parse(data, use_float=True):
        if prefix == "cells.item.outputs.item" and event == "start_map":
            read.clear()
        elif event == "string" and prefix.startswith("cells.item.outputs.item."):
            field = read.setdefault(prefix.removesuffix(".item"), [0, 0])
            if field[0] > MAX_KEPT_IMAGE or field[1] >= MAX_OUTPUT_STRINGS:
                continue
            value = value[:MAX_KEPT_IMAGE + 1 - field[0]]  # a field cut here is still too long to be kept whole
            field[0] += len(value)
            field[1] += 1
        builder.event(event, value)
    return builder.value


def _repair(raw: dict[str, Any]) -> list[str]:
    """Fix the known quirks of editors in the JSON of a notebook, in place; returns notes."""
    notes: set[str] = set()
    raw.setdefault("metadata", {})
    for cell in raw.get("cells", []):
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = {}
            notes.add("补上了缺失的单元格元数据")
        if cell.get("cell_type") != "code":
            for key in ("outputs", "execution_count"):
                if key in cell:
                    del cell[key]
                    notes.add("删掉了非代码单元格上的输出字段")
            continue
        cell.setdefault("outputs", [])
        cell.setdefault("execution_count", None)
        for output in cell["outputs"]:
            if isinstance(output, dict) and "transient" in output:
                del output["transient"]
                notes.add("删掉了输出中的 transient 字段（VS Code 写入）")
    return sorted(notes)


def _rebuilt(raw: dict[str, Any]) -> NotebookNode:
    """A valid notebook from the cells of an invalid one: type, source and nbgrader metadata kept."""
    cells = []
    for cell in raw.get("cells", []):
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        meta = {k: v for k, v in (cell.get("metadata") or {}).items() if k == "nbgrader"}
        makers: dict[Any, Callable[..., NotebookNode]] = {"code": nbformat.v4.new_code_cell,
                                                          "markdown": nbformat.v4.new_markdown_cell}
        make: Callable[..., NotebookNode] = makers.get(cell.get("cell_type"), nbformat.v4.new_raw_cell)
        cells.append(make(source, metadata=meta))
    kernelspec = raw.get("metadata", {}).get("kernelspec") or {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}
    nb: NotebookNode = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernelspec})
    return nb


def _joined(value: object) -> object:
    """A multiline string of a notebook's JSON, which may be a list of lines, as one string."""
    return "".join(map(str, value)) if isinstance(value, list) else value


def keep_student_outputs(cells: list[Any]) -> None:
    """Move each code cell's outputs (JSON as read, before nbformat builds anything of them) into its metadata,
    trimmed to what a TA reads: text and PNG images, at most `MAX_KEPT_TOTAL` bytes in all."""
    budget = MAX_KEPT_TOTAL
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        kept: list[dict[str, str]] = []
        outputs = cell.get("outputs")
        for output in outputs if isinstance(outputs, list) else []:
            if not isinstance(output, dict):
                continue
            data = output["data"] if isinstance(output.get("data"), dict) else {}
            text = _joined(output.get("text")) if output.get("output_type") == "stream" else _joined(
                data.get("text/plain"))
            image = _joined(data.get("image/png"))
            if isinstance(image, str) and len(image) <= min(MAX_KEPT_IMAGE, budget):
                kept.append({"image/png": image})
                budget -= len(image)
            elif isinstance(text, str) and text.strip() and budget > 0:
                text = text[:min(MAX_KEPT_TEXT, budget)]
                kept.append({"text/plain": text})
                budget -= len(text.encode())
        if kept:
            cell["metadata"][SUBMITTED_OUTPUTS] = kept
        cell["outputs"] = []
        cell["execution_count"] = None


def read(path: Path) -> tuple[NotebookNode | None, list[str]]:
    """(notebook with the student's outputs kept in metadata, notes) or (None, the reason it cannot be read)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return None, [f"{path.name} 过大（{size >> 20} MB，超过 {MAX_FILE_BYTES >> 20} MB），未读取"]
    try:
        data, notes = utf8(path.read_bytes())
    except UnicodeDecodeError:
        return None, [f"{path.name} 不是文本文件（既不是 UTF-8 也不是 GBK 编码）"]
    try:
        raw = _load(data)  # the file is parsed once: nbformat reads it only after its outputs are trimmed
    except ijson.JSONError:
        return None, [f"{path.name} 不是合法的 JSON：文件可能被截断或损坏"]
    del data
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, [f"{path.name} 不是 Jupyter notebook（没有 cells）"]
    notes += _repair(raw)
    keep_student_outputs(raw["cells"])
    try:
        nb = nbformat.reads(json.dumps(raw), as_version=4)
        nbformat.validate(nb)
    except Exception:  # noqa: BLE001 - anything nbformat cannot upgrade or validate: keep the cells, drop the rest
        nb = _rebuilt(raw)
        notes.append("notebook 格式不完全合法，已按单元格内容重建（输出未保留）")
    for index, cell in enumerate(nb.cells, 1):
        if cell.cell_type in ("markdown", "raw"):
            for name in repair_pasted_images(cell):
                notes.append(f"单元格 #{index} 显示的粘贴图片 {name} 不在文件中（编辑器没有保存它，或不是 PNG/JPEG），"
                             "已换成文字说明")
    kept = sum(len(json.dumps(cell.metadata.get(SUBMITTED_OUTPUTS, []), ensure_ascii=False).encode())
               for cell in nb.cells)
    graded = len(json.dumps(nb, ensure_ascii=False).encode()) - kept
    if graded > MAX_NOTEBOOK_BYTES:
        return None, [f"{path.name} 去掉输出后仍有 {graded >> 20} MB，超过 {MAX_NOTEBOOK_BYTES >> 20} MB"]
    return nb, notes
