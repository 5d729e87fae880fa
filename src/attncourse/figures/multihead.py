"""Figures of the unit "多头注意力" (deck `notebooks/02_multihead_attention.ipynb`).

Each writer draws one figure with matplotlib and saves it to `path` (SVG in the course; any format
matplotlib knows works, which helps when checking a figure by eye). `course figures` calls them after
`attncourse.plotting.use_course_style()`, so Chinese labels render.
"""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from . import save

# One colour per head, shared by both figures so that "head i" looks the same everywhere.
HEAD_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
GREY = "#F2F2F2"
EDGE = "#333333"


def _box(ax, x, y, w, h, text, face=GREY, fontsize=11, edge=EDGE, **kw):
    """A rounded box centred at (x, y) with a centred label."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, linewidth=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **kw)



def _arrow(ax, start, end, color=EDGE, lw=1.1):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=color,
                                 linewidth=lw, shrinkA=0, shrinkB=0))


def write_architecture(path):
    """Inputs → h parallel projections → h attention heads → concatenation → W_o → output (bottom to top)."""
    fig, ax = plt.subplots(figsize=(8.6, 6.4))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 8.4)
    ax.axis("off")

    # Inputs at the bottom.
    inputs = {"q": (2.6, "查询 $\\mathbf{q}$"), "k": (5.0, "键 $\\mathbf{k}$"), "v": (7.4, "值 $\\mathbf{v}$")}
    for x, label in inputs.values():
        _box(ax, x, 0.55, 1.6, 0.6, label, face="white")

    # Three heads drawn, the third stands for head h.
    head_x = [2.0, 4.6, 8.0]
    head_names = ["头 1", "头 2", "头 $h$"]
    for i, (hx, name) in enumerate(zip(head_x, head_names)):
        color = HEAD_COLORS[i]
        for j, (kind, dx) in enumerate((("q", -0.62), ("k", 0.0), ("v", 0.62))):
            px = hx + dx
            label = f"$\\mathbf{{W}}^{{({kind})}}_{{{i + 1 if i < 2 else 'h'}}}$"
            _box(ax, px, 2.35, 0.56, 0.9, label, face=color + "33", edge=color, fontsize=10)
            _arrow(ax, (inputs[kind][0], 0.87), (px, 1.88), color="#888888", lw=0.8)
            _arrow(ax, (px, 2.82), (hx + dx * 0.5, 3.7), color=color)
        _box(ax, hx, 4.1, 1.75, 0.75, f"注意力汇聚 $f$\n{name}", face=color + "55", edge=color, fontsize=10)
        _arrow(ax, (hx, 4.5), (hx, 5.35), color=color)
    ax.text(6.3, 4.1, "⋯", ha="center", va="center", fontsize=22)
    ax.text(6.3, 2.35, "⋯", ha="center", va="center", fontsize=22)

    # Concatenation: one bar with a coloured slot per head.
    bar_left, bar_w, bar_y = 1.2, 7.6, 5.45
    slots = [(bar_left + k * bar_w / 4, HEAD_COLORS[k] if k < 2 else (None if k == 2 else HEAD_COLORS[2]))
             for k in range(4)]
    for x0, color in slots:
        ax.add_patch(Rectangle((x0, bar_y), bar_w / 4, 0.5, facecolor=(color + "77") if color else "white",
                               edgecolor=EDGE, linewidth=1.0))
    ax.text(bar_left + 2.5 * bar_w / 4, bar_y + 0.25, "⋯", ha="center", va="center", fontsize=16)
    ax.text(bar_left - 0.15, bar_y + 0.25, "拼接", ha="right", va="center", fontsize=11)

    _arrow(ax, (5.0, 5.98), (5.0, 6.55))
    _box(ax, 5.0, 6.9, 2.6, 0.65, "全连接层 $\\mathbf{W}_o$", face="#FFFFFF")
    _arrow(ax, (5.0, 7.25), (5.0, 7.75))
    ax.text(5.0, 8.05, "输出（形状与单头相同）", ha="center", va="center", fontsize=11)

    # Right-hand notes: what each stage does.
    ax.text(9.95, 2.35, "$h$ 组独立的\n线性投影", ha="right", va="center", fontsize=9, color="#555555")
    save(fig, path)


def write_split(path):
    """transpose_qkv: columns of one sample are cut into head blocks, which become separate "samples"."""
    num_heads, items, width = 4, 3, 8  # 8 columns = 4 heads × 2
    fig, ax = plt.subplots(figsize=(9.6, 3.4))
    ax.set_xlim(-0.3, 19.3)
    ax.set_ylim(-1.3, 4.6)
    ax.set_aspect("equal")
    ax.axis("off")

    # Left: one sample, (num_items, num_hiddens), columns coloured by head.
    x0, y0, cell = 0.0, 1.0, 0.6
    for r in range(items):
        for c in range(width):
            head = c // (width // num_heads)
            ax.add_patch(Rectangle((x0 + c * cell, y0 + (items - 1 - r) * cell), cell, cell,
                                   facecolor=HEAD_COLORS[head] + "99", edgecolor="white", linewidth=1.5))
    ax.text(x0 + width * cell / 2, y0 + items * cell + 0.3, "样本 b：(num_items, num_hiddens)",
            ha="center", va="bottom", fontsize=10)
    for h in range(num_heads):
        ax.text(x0 + (2 * h + 1) * cell, y0 - 0.25, f"头 {h}", ha="center", va="top", fontsize=10,
                color=HEAD_COLORS[h], fontweight="bold")
    mid = y0 + items * cell / 2
    _arrow(ax, (x0 + width * cell + 0.4, mid), (x0 + width * cell + 3.0, mid))
    ax.text(x0 + width * cell + 1.7, mid + 0.3, "transpose_qkv", ha="center", va="bottom",
            fontsize=9, family="monospace")

    # Right: num_heads blocks of shape (num_items, num_hiddens / num_heads), stacked along the batch axis.
    bx = 8.6
    for h in range(num_heads):
        left = bx + h * 2.7
        for r in range(items):
            for c in range(2):
                ax.add_patch(Rectangle((left + c * cell, y0 + (items - 1 - r) * cell), cell, cell,
                                       facecolor=HEAD_COLORS[h] + "99", edgecolor="white", linewidth=1.5))
        ax.text(left + cell, y0 - 0.25, f"下标 b·{num_heads}+{h}", ha="center", va="top", fontsize=9,
                color=HEAD_COLORS[h], fontweight="bold")
    ax.text(bx + 1.5 * 2.7 + cell, y0 + items * cell + 0.3,
            "沿批量维排开：(batch_size·num_heads, num_items, num_hiddens/num_heads)",
            ha="center", va="bottom", fontsize=10)
    save(fig, path)


FIGURES = {
    "multihead-architecture.svg": write_architecture,
    "multihead-split.svg": write_split,
}
