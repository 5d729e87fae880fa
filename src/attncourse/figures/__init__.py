"""Figures for `img/`, made by code. Each unit module maps file names to functions that write them."""
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

UNIT_MODULES = ["scoring", "multihead", "gqa"]

# Lecture-hall sizes: every figure is drawn WIDTH inches wide, the size a slide shows it at (about 1060 px,
# 83% of a 1280-px slide), so a font size in a figure is the size on the screen; no text is smaller than 13 pt.
WIDTH = 10.8


def canvas(xlim: tuple[float, float], ylim: tuple[float, float], width: float = WIDTH) -> tuple[Any, Any]:
    """A figure `width` inches wide whose single axes fills it, with equal scales on x and y."""
    import matplotlib.pyplot as plt
    (x0, x1), (y0, y1) = xlim, ylim
    fig = plt.figure(figsize=(width, width * (y1 - y0) / (x1 - x0)))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def save(fig: Any, path: str | os.PathLike[str]) -> None:
    """Save and close; an SVG gets no date, so that re-running `course figures` changes no file."""
    import matplotlib.pyplot as plt
    fig.savefig(path, metadata={"Date": None} if str(path).endswith(".svg") else None)
    plt.close(fig)


def all_figures() -> dict[str, Callable[[Path], None]]:
    """{file name: writer(path)} over every unit's `FIGURES`."""
    figures: dict[str, Callable[[Path], None]] = {}
    for name in UNIT_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        figures.update(module.FIGURES)
    return figures


def write_all(img_dir: Path) -> list[str]:
    import matplotlib

    from ..plotting import use_course_style
    matplotlib.use("Agg")
    written = []
    for filename, writer in sorted(all_figures().items()):
        use_course_style()
        writer(img_dir / filename)
        written.append(filename)
    return written
