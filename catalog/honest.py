"""An ordinary honest class, as LMS downloads really look: correct answers written in several styles, saved by
the editors students use, with the harmless habits they have, uploaded the way they upload.

Built from the student version of an assignment and its catalog (the reference answer, the lecturer's code, the
deck's code), so it always matches the release. `write_downloads` returns the downloads to collect (in order)
and what every student must get: the clean answer's autograded points, nothing held, their name.

Editors and platforms: JupyterLab 4, classic Notebook 6 (nbformat 4.4, no cell ids), VS Code (its metadata, a
`transient` output key), PyCharm (indent 2), Colab (nbformat 4.0, `!pip install d2l`), a Windows tool (UTF-8 BOM,
CRLF). LMS habits: a GBK zip made by Windows, a UTF-8 zip, a download with a folder per student, a blank upload
followed by the answer in the same minute (`x (1)`, `x（1）`, `x-2`), a later upload under another name, a late
upload in a second download, macOS's `__MACOSX` entries. Code habits: the conda
fix `KMP_DUPLICATE_LIB_OK`, SimHei in matplotlib, `print(torch.__version__)`, magics, `tqdm`, seeds and cudnn
flags, type hints, `from __future__ import annotations`, try/except imports, helper functions, comments,
self-checks against the PyTorch functions the exercise forbids, saved outputs, a cell of its own loading an
IPython extension the grader does not have (`LOAD_EXT`: that cell fails, as on any machine without it).
"""
import datetime
import json
import struct
import zipfile
from pathlib import Path

import nbformat

from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import grade_id

A1 = "a1_scoring"
SURNAMES = ["张", "王", "李", "赵", "刘", "陈", "杨", "黄", "周", "吴", "徐", "孙", "马", "朱", "胡", "郭", "何", "林",
            "罗", "高", "欧阳", "司马", "诸葛", "上官"]
GIVEN = ["伟", "芳", "娜", "敏", "静", "丽", "强", "昞", "军", "洋", "勇", "艳", "杰", "娟", "涛", "明", "超", "秀英",
         "磊", "霞", "平", "刚", "桂英", "晨"]  # 昞 in GBK is 0x95 0x5C: a "\\" byte inside a character
PREAMBLES = [
    'import os\nos.environ["KMP_DUPLICATE_LIB_OK"] = "TRUE"  # conda 在 Windows 上的 OMP: Error #15\n',
    'import matplotlib.pyplot as plt\nplt.rcParams["font.sans-serif"] = ["SimHei"]\nplt.rcParams["axes.unicode_minus"] = False\n',
    "print(torch.__version__)\n",
    "%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\n",
    "from tqdm import tqdm\n",
    "torch.manual_seed(0)\ntorch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = False\n",
    "from __future__ import annotations\n",
    "try:\n    from d2l import torch as d2l\nexcept ImportError:  # 没装 d2l 的电脑\n    d2l = None\n",
    "import time, json, random, sys, pathlib\nprint(sys.version)\n",
    "import warnings\nwarnings.filterwarnings('ignore')\nimport logging\nlogging.info('开始')\n",
]
SELF_CHECK = '''
# 自查：和 PyTorch 自带的实现比一比（讲义也是这样检查的）
_q, _k, _v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
_mine = DotProductAttention(0.0).eval()(_q, _k, _v)
assert torch.allclose(_mine, F.scaled_dot_product_attention(_q, _k, _v), atol=1e-5)
sdpa = F.scaled_dot_product_attention  # 之后还想再比一次
print("自查通过")
'''
HELPER_STYLE = '''def _lengths_mask(num_keys: int, valid_lens: torch.Tensor) -> torch.Tensor:
    """(…, 键数) 的布尔掩码：位置 < 有效长度"""
    return torch.arange(num_keys, device=valid_lens.device) < valid_lens[..., None]


def masked_softmax(X: torch.Tensor, valid_lens: torch.Tensor | None) -> torch.Tensor:
    # 不掩蔽时就是普通的 softmax
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(-1)  # 一维：所有查询共用
    sdpa = torch.finfo(X.dtype).min  # 与别处的名字重名也没关系；float16 也放得下
    return F.softmax(X.masked_fill(~_lengths_mask(X.shape[-1], lens), sdpa), dim=-1)
'''
LOAD_EXT = "%load_ext lab_black\n# 保存时自动格式化代码（我的电脑上装了 jupyterlab-black）"
OUTPUT = {"output_type": "stream", "name": "stdout", "text": "理论值 4096.0；测得的点积方差 4101.3；除以 √d 之后的方差 16.02\n"}
IMAGE = {"output_type": "display_data", "metadata": {},
         "data": {"text/plain": "<Figure size 640x480 with 1 Axes>",
                  "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}}
EDITORS = ["jupyterlab", "notebook6", "vscode", "pycharm", "colab", "windows"]


def _answers(root, assignment):
    catalog = load_catalog(root, assignment)
    src = source_notebook(root, assignment, catalog)
    rel = nbformat.read(Path(root) / "release" / assignment / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    styles = {"reference": answered(rel, src), "lecturer": answered(rel, src, catalog.LECTURER)}
    styles.update({name: answered(rel, src, cells) for name, cells in getattr(catalog, "ALSO_CORRECT", {}).items()})
    styles["helpers"] = answered(rel, src, {"masked_softmax": HELPER_STYLE})
    return catalog.NOTEBOOK, rel, styles


def _drag_above(nb, moved, above):
    """Student habit: the part of answer `moved` (its instructions, answer and tests) dragged above the part of
    answer `above`."""
    ids = [grade_id(c) for c in nb.cells]
    start, end = ids.index(moved) - 1, max(i for i, gid in enumerate(ids) if gid and gid.startswith(f"test_{moved}"))
    block = nb.cells[start:end + 1]
    del nb.cells[start:end + 1]
    at = ids.index(above) - 1
    nb.cells[at:at] = block


def _habits(nb, k):
    """The answer with student k's habits: a preamble in the first answer cell, a self-check, saved outputs, a
    screenshot pasted into the written answer (one that the editor did not save, for some), a part of the notebook
    dragged above another, an extension the grader does not have loaded in a first cell."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid == "masked_softmax":
            cell.source = PREAMBLES[k % len(PREAMBLES)] + cell.source
        elif gid == "dot_product_attention" and k % 3 == 0:
            cell.source += "\n" + SELF_CHECK
        elif gid == "variance_experiment":
            cell.outputs = [nbformat.from_dict(OUTPUT)] + ([nbformat.from_dict(IMAGE)] if k % 4 == 0 else [])
            cell.execution_count = 7
        elif gid == "why_scale" and k % 6 == 2:
            cell.source += "\n\n我的实验结果截图：\n\n![截图](attachment:image.png)"
            if k % 12 == 2:
                cell.attachments = {"image.png": {"image/png": IMAGE["data"]["image/png"]}}
    if k % 7 == 3:
        _drag_above(nb, "bilinear_attention", "masked_softmax")
    if k % 7 == 5:
        nb.cells.insert(0, nbformat.v4.new_code_cell(LOAD_EXT))
    if k % 5 == 1:
        nb.cells.append(nbformat.v4.new_code_cell("!pip install d2l==1.0.3", outputs=[nbformat.from_dict(
            {"output_type": "stream", "name": "stdout", "text": "Requirement already satisfied: d2l==1.0.3\n"})]))
    return nb


def _saved(nb, editor):
    """The bytes the editor writes."""
    raw = json.loads(nbformat.writes(nb))
    if editor in ("notebook6", "colab"):
        raw["nbformat_minor"] = 4 if editor == "notebook6" else 0
        for cell in raw["cells"]:
            cell.pop("id", None)
            if editor == "notebook6" and cell["cell_type"] == "code":
                cell["metadata"].update({"collapsed": False, "ExecuteTime": {"start_time": "2026-10-09T12:00:00Z"}})
        if editor == "colab":
            raw["metadata"].update({"colab": {"provenance": [], "name": "scoring.ipynb"}, "accelerator": "GPU"})
    if editor == "vscode":
        raw["metadata"]["vscode"] = {"interpreter": {"hash": "0" * 64}}
        for cell in raw["cells"]:
            for output in cell.get("outputs", []):
                output["transient"] = {"display_id": "x"}
    text = json.dumps(raw, ensure_ascii=False, indent=2 if editor == "pycharm" else 1)
    if editor == "windows":
        return b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8")
    return text.encode("utf-8")


def _zip(path, entries, gbk=False):
    """A zip as Windows' own archiver on a Chinese system writes it (GBK names, no UTF-8 flag), or UTF-8."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, when in entries:
            info = zipfile.ZipInfo(name, date_time=when.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    if gbk:
        _recode(path, [name for name, _, _ in entries])
    return path


def _recode(path, names):
    """Rewrite the archive with the entries' names as GBK bytes and no UTF-8 flag (zipfile always flags
    non-ASCII names), stored uncompressed."""
    with zipfile.ZipFile(path) as z:
        items = [(info, z.read(info)) for info in z.infolist()]
    blob = bytearray()
    central = bytearray()
    for info, data in items:
        name = info.filename.encode("gbk")
        crc = zipfile.crc32(data) & 0xFFFFFFFF
        date = (info.date_time[0] - 1980) << 9 | info.date_time[1] << 5 | info.date_time[2]
        time_ = info.date_time[3] << 11 | info.date_time[4] << 5 | info.date_time[5] // 2
        offset = len(blob)
        blob += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, time_, date, crc, len(data), len(data),
                            len(name), 0) + name + data
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, time_, date, crc, len(data), len(data),
                               len(name), 0, 0, 0, 0, 0, offset) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(items), len(items), len(central), len(blob), 0)
    Path(path).write_bytes(bytes(blob + central + end))


def write_downloads(root, out_dir, assignment=A1, size=42):
    """Write the class's LMS downloads into `out_dir`; returns ([download paths, in collection order],
    {student id: {"name": full name, "style": ..., "editor": ..., "habit": ...}})."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    notebook, blank, styles = _answers(root, assignment)
    day = datetime.datetime(2026, 10, 9, 20, 0)
    windows, utf8, folders, late = [], [], [], []
    students = {}
    style_names = sorted(styles)
    for k in range(size):
        sid = f"2023{k:06d}"
        name = SURNAMES[k % len(SURNAMES)] + GIVEN[(k * 7) % len(GIVEN)]
        style, editor = style_names[k % len(style_names)], EDITORS[k % len(EDITORS)]
        data = _saved(_habits(styles[style], k), editor)
        empty = _saved(blank, editor)
        base = f"{sid}_{name}_{notebook}"
        habit = ["once", "blank then (1)", "blank then （1）", "blank then -2", "later, other name", "folder",
                 "late", "once"][k % 8]
        target = windows if k % 2 else utf8
        if habit == "once":
            target.append((f"{base}.ipynb", data, day))
        elif habit.startswith("blank then"):
            suffix = {"(1)": " (1)", "（1）": "（1）", "-2": "-2"}[habit.split()[-1]]
            target += [(f"{base}.ipynb", empty, day), (f"{base}{suffix}.ipynb", data, day)]
        elif habit == "later, other name":
            target += [(f"{base}.ipynb", empty, day), (f"{base}_最终版.ipynb", data, day + datetime.timedelta(minutes=7))]
        elif habit == "folder":
            folders.append((f"{sid}_{name}/{notebook}.ipynb", data, day))
        else:
            late.append((f"{base}.ipynb", data, day + datetime.timedelta(days=1)))
        students[sid] = {"name": name, "style": style, "editor": editor, "habit": habit,
                         "screenshot": {2: "pasted", 8: "not saved"}.get(k % 12, ""), "dragged": k % 7 == 3,
                         "load_ext": k % 7 == 5}
    utf8.append(("__MACOSX/._scoring.ipynb", b"\x00\x05\x16\x07", day))
    downloads = [_zip(out_dir / "lms_windows.zip", windows, gbk=True), _zip(out_dir / "lms_utf8.zip", utf8),
                 _zip(out_dir / "lms_folders.zip", folders), _zip(out_dir / "lms_late.zip", late)]
    return downloads, students
