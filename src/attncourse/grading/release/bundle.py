"""The student hand-out of one assignment: `build/student/<A>.zip`.

It holds the released notebook(s), the figures they show, a wheel of `attncourse`, `constraints.txt` (the
versions the grader uses) and a short Chinese README: everything a student needs, nothing from this
repository's `source/` or `catalog/`. Before the zip is written, its notebooks pass the release leak check
and its wheel is checked to hold exactly the public package `src/attncourse`.
"""
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import nbformat

from ...config import settings
from ..course import build_dir, folders
from . import student_version as release

IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)|<img[^>]*src=\"([^\"]+)\"")
README = Path(__file__).resolve().parents[2] / "templates" / "student" / "README.md"


def figures(notebook_path: str | os.PathLike[str]) -> list[str]:
    """Local images a notebook's markdown shows, as paths relative to the notebook's folder."""
    nb = nbformat.read(notebook_path, as_version=4)
    links = (a or b for cell in nb.cells if cell.cell_type == "markdown" for a, b in IMAGE.findall(cell.source))
    return sorted({link for link in links if not link.startswith(("http:", "https:", "data:", "attachment:"))})


def wheel(root: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """A wheel of the attncourse package (no dependencies bundled: pip installs them from PyPI)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out_dir), str(root)], check=True)
    return next(Path(out_dir).glob("attncourse-*.whl"))


def contents(root: Path, assignment: str, scratch: str | os.PathLike[str]) -> dict[str, bytes]:
    """{name in the zip: bytes} of the hand-out."""
    root = Path(root)
    where = folders(root)
    notebooks = where.released_notebooks(assignment)
    if not notebooks or assignment not in release.record(root):
        raise FileNotFoundError(f"{assignment} 尚未发布：先运行 course release {assignment}")
    files = {f"{assignment}/{nb.name}": nb.read_bytes() for nb in notebooks}
    for nb in notebooks:  # img/ beside the notebooks' folder, as in the course, so "../img/..." still works
        for link in figures(nb):
            files[os.path.relpath((nb.parent / link).resolve(), root)] = (nb.parent / link).read_bytes()
    built = wheel(root, scratch)
    files[built.name] = built.read_bytes()
    constraints = root / "constraints.txt"
    if constraints.exists():
        files["constraints.txt"] = constraints.read_bytes()
    files["README.md"] = README.read_text(encoding="utf-8").format(
        title=settings(root)["course"]["name"], assignment=assignment, wheel=built.name,
        contents=listing(files, assignment), first_notebook=notebooks[0].name).encode()
    return files


def listing(files: Mapping[str, bytes], assignment: str) -> str:
    """The README's list of what the hand-out holds, made from the files themselves (README.md included)."""
    notebooks = sorted(n.split("/", 1)[1] for n in files if n.startswith(f"{assignment}/"))
    figures = sorted({n.split("/", 1)[0] for n in files if "/" in n and not n.startswith(f"{assignment}/")})
    lines = [f"- `{assignment}/`：作业 notebook（{'、'.join(notebooks)}）"]
    lines += [f"- `{folder}/`：notebook 用到的图" for folder in figures]
    lines += [f"- `{n}`：课程的辅助包 `attncourse`（画图、中文字体、设备选择、中文的 Validate），安装时会一并装上 "
              "PyTorch、d2l、JupyterLab（含中文界面）和 nbgrader" for n in files if n.endswith(".whl")]
    if "constraints.txt" in files:
        lines.append("- `constraints.txt`：与评分环境相同的版本号")
    return "\n".join([*lines, "- `README.md`：本说明"])


def leaks(root: str | os.PathLike[str], assignment: str, files: Mapping[str, bytes]) -> list[str]:
    """What should not be in the hand-out: notebooks that fail the release leak check, files of source/ or
    catalog/, and anything in the wheel that is not this repository's public package src/attncourse."""
    root, found, where = Path(root), [], folders(root)
    package = Path(__file__).resolve().parents[2]
    for name, data in files.items():
        if name.startswith(("source/", "catalog/")) or "/source/" in name or "/catalog/" in name:
            found.append(f"{name}: 课程的 source/ 或 catalog/ 文件")
        elif name.endswith(".ipynb"):
            source = where.source(assignment) / Path(name).name
            with tempfile.NamedTemporaryFile(suffix=".ipynb") as copy:
                copy.write(data)
                copy.flush()
                try:
                    release.check_release(source, copy.name)
                except release.LeakError as exc:
                    found.append(f"{name}: {exc}")
        elif name.endswith(".whl"):
            with zipfile.ZipFile(io.BytesIO(data)) as inner:
                for member in inner.namelist():
                    if member.startswith("attncourse-") and ".dist-info/" in member:
                        continue
                    mine = package.parent / member
                    if not mine.is_file() or mine.read_bytes() != inner.read(member):
                        found.append(f"{name}: {member} 不是 src/ 中的公开文件")
    return found


def build(root: Path, assignment: str) -> Path:
    """Write build/student/<assignment>.zip; returns its path. Raises LeakError if anything secret is in it."""
    root = Path(root)
    with tempfile.TemporaryDirectory() as scratch:
        files = contents(root, assignment, scratch)
    found = leaks(root, assignment, files)
    if found:
        raise release.LeakError(f"作业包含有答案或隐藏测试：{'; '.join(found[:5])}")
    target = build_dir(root) / "student" / f"{assignment}.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in sorted(files.items()):
            z.writestr(f"{assignment}/{name}", data)
    tmp.replace(target)
    return target
