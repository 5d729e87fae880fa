"""Course-wide settings from `course.toml` at the course root."""
import html
import os
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The course root: the nearest folder upwards that holds `course.toml`."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "course.toml").is_file():
            return folder
    raise FileNotFoundError(f"找不到 course.toml（从 {here} 向上查找）：请在课程根目录下运行。")


@lru_cache
def settings(root: str | Path | None = None) -> dict[str, Any]:
    with open(Path(root or find_root()) / "course.toml", "rb") as f:
        return tomllib.load(f)


def title_slide(title: str, root: str | Path | None = None) -> str:
    """Markdown/HTML of a title slide: the title and the lecturer from `course.toml`."""
    lecturer = settings(root)["lecturer"]
    lines = ['<div class="course-title">', f'<h1>{html.escape(title)}</h1>', "<hr>"]
    lines += [f"<p>{html.escape(lecturer[key])}</p>" for key in ("name", "affiliation", "email")]
    lines.append("</div>")
    return "\n".join(lines)
