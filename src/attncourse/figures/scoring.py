"""Figures of the unit "注意力评分函数" (deck `notebooks/01_attention_scoring.ipynb`).

Each writer draws one schematic with matplotlib and saves it to `path`; `course figures` calls them
after `use_course_style()`, so Chinese labels use the course's CJK font.
"""
from pathlib import Path
from typing import Any

from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from . import canvas, save

# Colours shared by the figures of this unit.
QUERY = "#fde0c5"   # 查询
KEY = "#d6e6f5"     # 键
VALUE = "#dbeed3"   # 值
WEIGHT = "#f6d5d5"  # 注意力权重
NEUTRAL = "#f2f2f2"
EDGE = "#444444"
ARROW = dict(arrowstyle="-|>", color=EDGE, lw=1.3, shrinkA=0, shrinkB=0, mutation_scale=14)
LABEL, TEXT, SMALL = 17, 15, 13  # points on the screen (figures are drawn at their size on a slide)


def _box(ax: Any, x: float, y: float, text: str, color: str, w: float = 0.7, h: float = 0.5,
         fontsize: float = LABEL) -> None:
    """A rounded box centred at (x, y) with `text` inside."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=color, ec=EDGE, lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _circle(ax: Any, x: float, y: float, text: str, color: str = NEUTRAL, r: float = 0.27,
            fontsize: float = LABEL) -> None:
    ax.add_patch(Circle((x, y), r, fc=color, ec=EDGE, lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops=ARROW)


def attention_pooling(path: Path) -> None:
    """Query, keys, scoring function a, softmax, weights, values, weighted sum, output."""
    rows = {"1": 3.0, "2": 1.8, "m": 0.0}  # y of the rows k_1, k_2, k_m; "⋮" sits between 2 and m
    x_key, x_a, x_soft, x_w, x_mul, x_sum, x_out = 0.0, 1.9, 3.45, 4.95, 6.45, 8.15, 9.65
    r = 0.29
    MID = 1.5  # height of softmax centre, sum and output
    fig, ax = canvas((-1.35, 10.3), (-1.0, 5.0))

    # Query: fans out to every scoring function.
    q_xy = (x_key, 4.05)
    _box(ax, *q_xy, r"$\mathbf{q}$", QUERY)
    for y in rows.values():
        _arrow(ax, (q_xy[0] + 0.36, q_xy[1] - 0.2), (x_a - r * 0.75, y + r * 0.7))

    for i, y in rows.items():
        _box(ax, x_key, y, rf"$\mathbf{{k}}_{i}$", KEY)
        _arrow(ax, (x_key + 0.36, y), (x_a - r, y))
        _circle(ax, x_a, y, r"$a$", r=r)
        _arrow(ax, (x_a + r, y), (x_soft - 0.3, y))
        _box(ax, x_w, y, rf"$\alpha_{i}$", WEIGHT, w=0.66)
        _arrow(ax, (x_soft + 0.3, y), (x_w - 0.33, y))
        _circle(ax, x_mul, y, r"$\times$", r=0.22, fontsize=TEXT)
        _arrow(ax, (x_w + 0.33, y), (x_mul - 0.22, y))
        _box(ax, x_mul, y + 0.62, rf"$\mathbf{{v}}_{i}$", VALUE, w=0.66, h=0.4, fontsize=TEXT)
        _arrow(ax, (x_mul, y + 0.42), (x_mul, y + 0.22))
        _arrow(ax, (x_mul + 0.22, y), (x_sum - 0.32, MID + (y - MID) * 0.25))
    ax.text(x_key - 0.45, rows["2"], "键", ha="right", va="center", fontsize=TEXT, color="#333333")
    for x in (x_key, x_a, x_w):
        ax.text(x, 0.95, r"$\vdots$", ha="center", va="center", fontsize=LABEL)
    ax.text(x_mul, 1.22, r"$\vdots$", ha="center", va="center", fontsize=TEXT)

    # softmax spans all rows; the sum and the output sit in the middle.
    ax.add_patch(FancyBboxPatch((x_soft - 0.3, -0.35), 0.6, 3.7, boxstyle="round,pad=0.02,rounding_size=0.1",
                                fc=NEUTRAL, ec=EDGE, lw=1.2))
    ax.text(x_soft, MID, "softmax", rotation=90, ha="center", va="center", fontsize=LABEL)
    _circle(ax, x_sum, MID, r"$\sum$", r=0.32)
    _box(ax, x_out, MID, "输出", NEUTRAL, w=0.9, h=0.55, fontsize=TEXT)
    _arrow(ax, (x_sum + 0.32, MID), (x_out - 0.45, MID))

    # Column titles and the three steps.
    for x, text in [(x_a, "评分函数"), (x_soft, "归一化"), (x_w, "注意力权重"),
                    (x_mul, "值"), (x_sum, "加权求和")]:
        ax.text(x, 4.75, text, ha="center", va="center", fontsize=TEXT, color="#333333")
    ax.text(x_key - 0.45, q_xy[1], "查询", ha="right", va="center", fontsize=TEXT, color="#333333")
    for x0, x1, text in [(x_key - 0.4, x_a + 0.6, "① 评分  $s_i = a(\\mathbf{q}, \\mathbf{k}_i)$"),
                         (x_soft - 0.45, x_w + 0.5, "② 归一化  $\\alpha_i$"),
                         (x_mul - 0.5, x_out + 0.5, "③ 加权求和  $\\sum_i \\alpha_i \\mathbf{v}_i$")]:
        ax.plot([x0, x1], [-0.5, -0.5], color="#999999", lw=1.2)
        ax.text((x0 + x1) / 2, -0.78, text, ha="center", va="center", fontsize=TEXT)
    save(fig, path)


def masking(path: Path) -> None:
    """Two padded sequences and the masks that 1-D and 2-D `valid_lens` make, side by side."""
    fig, ax = canvas((-1.45, 13.6), (-0.75, 3.45))

    # Left: a padded mini-batch.
    batch = [["我", "爱", "<pad>", "<pad>"], ["今天", "下", "雨", "<pad>"]]
    for b, tokens in enumerate(batch):
        y = 1.25 - b * 1.1
        ax.text(-0.15, y + 0.35, f"样本 {b + 1}", ha="right", va="center", fontsize=TEXT)
        for j, tok in enumerate(tokens):
            pad = tok == "<pad>"
            ax.add_patch(Rectangle((j, y), 0.92, 0.7, fc=NEUTRAL if pad else KEY, ec="#aaaaaa" if pad else EDGE,
                                   lw=1.0, hatch="///" if pad else None))
            ax.text(j + 0.46, y + 0.35, tok, ha="center", va="center", fontsize=SMALL if pad else TEXT,
                    color="#555555" if pad else "black",
                    bbox=dict(fc=NEUTRAL, ec="none", pad=0.6) if pad else None)
    ax.text(1.84, 2.5, "填充后的小批量（键）", ha="center", va="center", fontsize=TEXT)
    ax.text(1.84, -0.45, "有效长度：2 和 3", ha="center", va="center", fontsize=TEXT)

    # Middle and right: which (query, key) pairs take part.
    for x0, lens, title in [(5.7, [[2, 2], [3, 3]], "一维 valid_lens = [2, 3]\n（批量大小，）"),
                            (10.6, [[1, 3], [2, 4]], "二维 valid_lens = [[1, 3], [2, 4]]\n（批量大小，查询数）")]:
        for b, per_query in enumerate(lens):
            y0 = 1.3 - b * 1.3
            ax.text(x0 - 0.15, y0 + 0.5, f"样本 {b + 1}", ha="right", va="center", fontsize=SMALL)
            for i, n_valid in enumerate(per_query):
                y = y0 + 0.55 - i * 0.55
                for j in range(4):
                    ok = j < n_valid
                    ax.add_patch(Rectangle((x0 + j * 0.55, y), 0.55, 0.55, fc=WEIGHT if ok else "white", ec=EDGE,
                                           lw=1.0, hatch=None if ok else "///"))
                    ax.text(x0 + j * 0.55 + 0.275, y + 0.275, "✓" if ok else "", ha="center", va="center",
                            fontsize=SMALL, color="#8a1c1c")
        ax.text(x0 + 1.1, 2.85, title, ha="center", va="center", fontsize=TEXT)
        ax.text(x0 + 1.1, -0.45, "列：键；行：查询", ha="center", va="center", fontsize=SMALL, color="#555555")
    save(fig, path)


FIGURES = {
    "scoring-attention-pooling.svg": attention_pooling,
    "scoring-masking.svg": masking,
}
