"""Figures of the unit "多头注意力" (deck `notebooks/02_multihead_attention.ipynb`).

Each writer draws one figure with matplotlib and saves it to `path` (SVG in the course; any format
matplotlib knows works, which helps when checking a figure by eye). `course figures` calls them after
`attncourse.plotting.use_course_style()`, so Chinese labels render.
"""
from pathlib import Path
from typing import Any

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from . import canvas, save

# One colour per head, shared by both figures so that "head i" looks the same everywhere.
HEAD_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
GREY = "#F2F2F2"
EDGE = "#333333"
LABEL, TEXT, SMALL = 16, 15, 13  # points on the screen (figures are drawn at their size on a slide)


def _box(ax: Any, x: float, y: float, w: float, h: float, text: str, face: str = GREY, fontsize: float = TEXT,
         edge: str = EDGE, **kw: Any) -> None:
    """A rounded box centred at (x, y) with a centred label."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, linewidth=1.3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **kw)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], color: str = EDGE, lw: float = 1.3) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color=color,
                                 linewidth=lw, shrinkA=0, shrinkB=0))


def write_architecture(path: Path) -> None:
    """Inputs → h parallel projections → h attention heads → concatenation → W_o → output (left to right)."""
    fig, ax = canvas((-1.0, 12.6), (-1.05, 5.05))

    # Inputs on the left.
    inputs = {"q": (3.7, "查询 $\\mathbf{q}$"), "k": (1.9, "键 $\\mathbf{k}$"), "v": (0.1, "值 $\\mathbf{v}$")}
    for y, label in inputs.values():
        _box(ax, 0.0, y, 1.5, 0.6, label, face="white")

    # Three heads drawn, the third stands for head h: its projections W_q, W_k, W_v stacked, then f.
    head_y = [3.75, 2.0, -0.25]
    for i, hy in enumerate(head_y):
        color, name = HEAD_COLORS[i], ("1", "2", "h")[i]
        for kind, dy in (("q", 0.5), ("k", 0.0), ("v", -0.5)):
            label = f"$\\mathbf{{W}}^{{({kind})}}_{{{name}}}$"
            _box(ax, 3.0, hy + dy, 0.85, 0.42, label, face=color + "33", edge=color, fontsize=SMALL)
            _arrow(ax, (0.75, inputs[kind][0]), (3.0 - 0.43, hy + dy), color="#999999", lw=0.9)
            _arrow(ax, (3.43, hy + dy), (4.55, hy + dy * 0.4), color=color)
        head = "$h$" if name == "h" else name
        _box(ax, 5.5, hy, 1.9, 0.95, f"注意力汇聚 $f$\n头 {head}", face=color + "55", edge=color, fontsize=SMALL)
        _arrow(ax, (6.45, hy), (7.45, hy), color=color)
    for x in (3.0, 5.5):
        ax.text(x, 0.85, r"$\vdots$", ha="center", va="center", fontsize=LABEL)

    # Concatenation: one column with a coloured slot per head.
    bar_x, bar_w, bar_top, bar_bottom = 7.45, 0.6, 4.3, -0.8
    slot = (bar_top - bar_bottom) / 4
    for k, head_color in enumerate([HEAD_COLORS[0], HEAD_COLORS[1], None, HEAD_COLORS[2]]):
        y0 = bar_top - (k + 1) * slot
        ax.add_patch(Rectangle((bar_x, y0), bar_w, slot, facecolor=(head_color + "77") if head_color else "white",
                               edgecolor=EDGE, linewidth=1.2))
    ax.text(bar_x + bar_w / 2, bar_top - 2.5 * slot, r"$\vdots$", ha="center", va="center", fontsize=LABEL)

    mid = (bar_top + bar_bottom) / 2
    _arrow(ax, (bar_x + bar_w, mid), (8.75, mid))
    _box(ax, 9.55, mid, 1.6, 0.75, "全连接层\n$\\mathbf{W}_o$", face="#FFFFFF")
    _arrow(ax, (10.35, mid), (11.0, mid))
    _box(ax, 11.75, mid, 1.5, 0.75, "输出", face=GREY)
    ax.text(11.75, mid - 0.75, "形状与\n单头相同", ha="center", va="top", fontsize=SMALL, color="#555555")

    # What each stage does, above its column.
    for x, text in [(0.0, "输入"), (3.0, "$h$ 组独立的线性投影"), (5.5, "$h$ 个头并行"),
                    (bar_x + bar_w / 2, "拼接")]:
        ax.text(x, 4.75, text, ha="center", va="center", fontsize=TEXT, color="#333333")
    save(fig, path)


def write_split(path: Path) -> None:
    """transpose_qkv: columns of one sample are cut into head blocks, which become separate "samples"."""
    num_heads, items, width = 4, 3, 8  # 8 columns = 4 heads × 2
    fig, ax = canvas((-0.3, 18.3), (-1.0, 3.15))

    # Left: one sample, (num_items, num_hiddens), columns coloured by head.
    x0, y0, cell = 0.0, 0.6, 0.6
    for r in range(items):
        for c in range(width):
            head = c // (width // num_heads)
            ax.add_patch(Rectangle((x0 + c * cell, y0 + (items - 1 - r) * cell), cell, cell,
                                   facecolor=HEAD_COLORS[head] + "99", edgecolor="white", linewidth=1.5))
    ax.text(x0 + width * cell / 2, y0 + items * cell + 0.3, "样本 b：(num_items, num_hiddens)",
            ha="center", va="bottom", fontsize=SMALL)
    for h in range(num_heads):
        ax.text(x0 + (2 * h + 1) * cell, y0 - 0.25, f"头 {h}", ha="center", va="top", fontsize=SMALL,
                color=HEAD_COLORS[h], fontweight="bold")
    mid = y0 + items * cell / 2
    _arrow(ax, (x0 + width * cell + 0.4, mid), (x0 + width * cell + 3.0, mid))
    ax.text(x0 + width * cell + 1.7, mid + 0.3, "transpose_qkv", ha="center", va="bottom",
            fontsize=SMALL, family="monospace")

    # Right: num_heads blocks of shape (num_items, num_hiddens / num_heads), stacked along the batch axis.
    bx = 8.6
    for h in range(num_heads):
        left = bx + h * 2.7
        for r in range(items):
            for c in range(2):
                ax.add_patch(Rectangle((left + c * cell, y0 + (items - 1 - r) * cell), cell, cell,
                                       facecolor=HEAD_COLORS[h] + "99", edgecolor="white", linewidth=1.5))
        ax.text(left + cell, y0 - 0.25, f"下标 b·{num_heads}+{h}", ha="center", va="top", fontsize=SMALL,
                color=HEAD_COLORS[h], fontweight="bold")
    ax.text(bx + 1.5 * 2.7 + cell, y0 + items * cell + 0.3, "沿批量维排开，每块成为一个“样本”",
            ha="center", va="bottom", fontsize=SMALL)
    ax.text(bx + 1.5 * 2.7 + cell, -0.7, "形状 (batch_size·num_heads, num_items, num_hiddens/num_heads)",
            ha="center", va="center", fontsize=SMALL)
    save(fig, path)


FIGURES = {
    "multihead-architecture.svg": write_architecture,
    "multihead-split.svg": write_split,
}
