"""Figures of the unit "注意力评分函数" (deck `notebooks/01_attention_scoring.ipynb`).

Each writer draws one schematic with matplotlib and saves it to `path`; `course figures` calls them
after `use_course_style()`, so Chinese labels use the course's CJK font.
"""
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from . import save

# Colours shared by the figures of this unit.
QUERY = "#fde0c5"   # 查询
KEY = "#d6e6f5"     # 键
VALUE = "#dbeed3"   # 值
WEIGHT = "#f6d5d5"  # 注意力权重
NEUTRAL = "#f2f2f2"
EDGE = "#444444"
ARROW = dict(arrowstyle="-|>", color=EDGE, lw=1.1, shrinkA=0, shrinkB=0, mutation_scale=11)


def _box(ax, x, y, text, color, w=0.7, h=0.5, fontsize=13):
    """A rounded box centred at (x, y) with `text` inside."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=color, ec=EDGE, lw=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _circle(ax, x, y, text, color=NEUTRAL, r=0.27, fontsize=13):
    ax.add_patch(Circle((x, y), r, fc=color, ec=EDGE, lw=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end):
    ax.annotate("", xy=end, xytext=start, arrowprops=ARROW)



def attention_pooling(path):
    """Query, keys, scoring function a, softmax, weights, values, weighted sum, output."""
    fig, ax = plt.subplots(figsize=(10.5, 5.2))
    rows = {"1": 3.6, "2": 2.2, "m": 0.0}  # y of the rows k_1, k_2, k_m; "⋮" sits between 2 and m
    x_key, x_a, x_soft, x_w, x_mul, x_sum, x_out = 0.0, 1.9, 3.45, 4.95, 6.45, 8.05, 9.5
    r = 0.27
    MID = 1.8  # height of softmax centre, sum and output

    # Query: fans out to every scoring function.
    q_xy = (x_key, 5.05)
    _box(ax, *q_xy, r"$\mathbf{q}$", QUERY)
    for y in rows.values():
        _arrow(ax, (q_xy[0] + 0.36, q_xy[1] - 0.2), (x_a - r * 0.75, y + r * 0.7))

    for i, y in rows.items():
        _box(ax, x_key, y, rf"$\mathbf{{k}}_{i}$", KEY)
        _arrow(ax, (x_key + 0.36, y), (x_a - r, y))
        _circle(ax, x_a, y, r"$a$")
        _arrow(ax, (x_a + r, y), (x_soft - 0.3, y))
        _box(ax, x_w, y, rf"$\alpha_{i}$", WEIGHT, w=0.62)
        _arrow(ax, (x_soft + 0.3, y), (x_w - 0.31, y))
        _circle(ax, x_mul, y, r"$\times$", r=0.22)
        _arrow(ax, (x_w + 0.31, y), (x_mul - 0.22, y))
        _box(ax, x_mul, y + 0.68, rf"$\mathbf{{v}}_{i}$", VALUE, w=0.62, h=0.42)
        _arrow(ax, (x_mul, y + 0.47), (x_mul, y + 0.22))
        _arrow(ax, (x_mul + 0.22, y), (x_sum - 0.3, MID + (y - MID) * 0.25))
    ax.text(x_key - 0.45, rows["2"], "键", ha="right", va="center", fontsize=12, color="#333333")
    for x in (x_key, x_a, x_w):
        ax.text(x, 1.1, r"$\vdots$", ha="center", va="center", fontsize=15)
    ax.text(x_mul, 1.42, r"$\vdots$", ha="center", va="center", fontsize=15)

    # softmax spans all rows; the sum and the output sit in the middle.
    ax.add_patch(FancyBboxPatch((x_soft - 0.3, -0.35), 0.6, 4.3, boxstyle="round,pad=0.02,rounding_size=0.1",
                                fc=NEUTRAL, ec=EDGE, lw=1.0))
    ax.text(x_soft, MID, "softmax", rotation=90, ha="center", va="center", fontsize=13)
    _circle(ax, x_sum, MID, r"$\sum$", r=0.3)
    _box(ax, x_out, MID, "输出", NEUTRAL, w=0.8)
    _arrow(ax, (x_sum + 0.3, MID), (x_out - 0.4, MID))

    # Column titles and the three steps.
    for x, text in [(x_a, "评分函数"), (x_soft, "归一化"), (x_w, "注意力权重"),
                    (x_mul, "值"), (x_sum, "加权求和")]:
        ax.text(x, 5.85, text, ha="center", va="center", fontsize=12, color="#333333")
    ax.text(x_key - 0.45, q_xy[1], "查询", ha="right", va="center", fontsize=12, color="#333333")
    for x0, x1, text in [(x_key - 0.4, x_a + 0.5, "① 打分  $s_i = a(\\mathbf{q}, \\mathbf{k}_i)$"),
                         (x_soft - 0.35, x_w + 0.4, "② 归一化  $\\alpha_i$"),
                         (x_mul - 0.5, x_out + 0.5, "③ 加权求和  $\\sum_i \\alpha_i \\mathbf{v}_i$")]:
        ax.plot([x0, x1], [-0.75, -0.75], color="#999999", lw=1)
        ax.text((x0 + x1) / 2, -1.05, text, ha="center", va="center", fontsize=12)

    ax.set_xlim(-1.2, 10.1)
    ax.set_ylim(-1.35, 6.1)
    ax.set_aspect("equal")
    ax.axis("off")
    save(fig, path)


def masking(path):
    """Two padded sequences and the masks that 1-D and 2-D `valid_lens` make."""
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.6), gridspec_kw={"width_ratios": [1.15, 1, 1]})

    # Left: a padded mini-batch.
    ax = axes[0]
    batch = [["我", "爱", "<pad>", "<pad>"], ["今天", "下", "雨", "<pad>"]]
    for b, tokens in enumerate(batch):
        y = 1.2 - b * 1.1
        ax.text(-0.15, y + 0.35, f"样本 {b + 1}", ha="right", va="center", fontsize=11)
        for j, tok in enumerate(tokens):
            pad = tok == "<pad>"
            ax.add_patch(Rectangle((j, y), 0.92, 0.7, fc=NEUTRAL if pad else KEY, ec="#aaaaaa" if pad else EDGE, lw=0.8,
                                   hatch="///" if pad else None))
            ax.text(j + 0.46, y + 0.35, tok, ha="center", va="center", fontsize=10 if pad else 12,
                    color="#555555" if pad else "black",
                    bbox=dict(fc=NEUTRAL, ec="none", pad=0.6) if pad else None)
    ax.text(1.84, 2.3, "填充后的小批量（键）", ha="center", va="center", fontsize=12)
    ax.text(1.84, -0.35, "有效长度：2 和 3", ha="center", va="center", fontsize=11)
    ax.set_xlim(-1.3, 4.0)
    ax.set_ylim(-0.6, 2.6)

    # Middle and right: which (query, key) pairs take part.
    for ax, lens, title in [(axes[1], [[2, 2], [3, 3]], "一维 valid_lens = [2, 3]\n（批量大小，）"),
                            (axes[2], [[1, 3], [2, 4]], "二维 valid_lens = [[1, 3], [2, 4]]\n（批量大小，查询数）")]:
        for b, per_query in enumerate(lens):
            y0 = 1.25 - b * 1.25
            ax.text(-0.15, y0 + 0.5, f"样本 {b + 1}", ha="right", va="center", fontsize=10)
            for i, n_valid in enumerate(per_query):
                y = y0 + 0.5 - i * 0.5
                for j in range(4):
                    ok = j < n_valid
                    ax.add_patch(Rectangle((j * 0.5, y), 0.5, 0.5, fc=WEIGHT if ok else "white", ec=EDGE,
                                           lw=0.8, hatch=None if ok else "///"))
                    ax.text(j * 0.5 + 0.25, y + 0.25, "✓" if ok else "", ha="center", va="center",
                            fontsize=10, color="#8a1c1c")
        ax.text(1.0, 2.55, title, ha="center", va="center", fontsize=11)
        ax.text(1.0, -0.3, "列：键；行：查询", ha="center", va="center", fontsize=10, color="#555555")
        ax.set_xlim(-1.2, 2.4)
        ax.set_ylim(-0.5, 3.0)
    for ax in axes:
        ax.set_aspect("equal")
        ax.axis("off")
    save(fig, path)


FIGURES = {
    "scoring-attention-pooling.svg": attention_pooling,
    "scoring-masking.svg": masking,
}
