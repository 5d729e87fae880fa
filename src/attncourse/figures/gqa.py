"""Figures of the unit "KV 缓存与分组查询注意力" (deck `notebooks/03_mqa_gqa.ipynb`).

Each writer draws one figure with matplotlib and saves it to `path`; `course figures` calls them after
`attncourse.plotting.use_course_style()`, so Chinese labels render.
"""
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from . import save
from .multihead import EDGE, GREY, HEAD_COLORS, _arrow, _box

# Eight heads need eight colours: the unit-2 colours first, so head 0 looks the same in both units.
COLORS = HEAD_COLORS + ["#937860", "#DA8BC3", "#CCB974"]
NEW = "#C44E52"  # what step t adds


def write_variants(path: Path) -> None:
    """MHA, GQA-2 and MQA side by side: 8 query heads, each joined to the key/value head it reads."""
    num_heads = 8
    panels = [(8, "多头注意力（MHA）", "8 个键值头"), (2, "分组查询注意力（GQA-2）", "2 个键值头，每组 4 个查询头"),
              (1, "多查询注意力（MQA）", "1 个键值头")]
    # Drawn at slide size: about 11.5 inches wide once cropped, so that it fills 80% of a 1280-px slide at 1:1
    # and its smallest text (14 pt) reads from the back row.
    fig, axes = plt.subplots(1, 3, figsize=(14.85, 4.2))
    for ax, (groups, title, subtitle) in zip(axes, panels, strict=True):
        ax.set_xlim(-0.6, num_heads - 0.4)
        ax.set_ylim(-0.65, 3.3)
        ax.axis("off")
        ax.set_title(f"{title}\n{subtitle}", fontsize=15)
        group_size = num_heads // groups
        kv_x = [(j + 0.5) * group_size - 0.5 for j in range(groups)]  # under the middle of its group
        for i in range(num_heads):
            j = i // group_size
            color = COLORS[i] if groups == num_heads else COLORS[j]
            ax.plot([i, kv_x[j]], [2.25, 0.55], color=color, lw=1.6)
            _box(ax, i, 2.5, 0.7, 0.5, str(i), face=color + "55", edge=color, fontsize=14)
        for j, x in enumerate(kv_x):
            color = COLORS[j]
            _box(ax, x, 0.3, 0.9 if groups < num_heads else 0.7, 0.5, str(j), face=color + "AA", edge=color,
                 fontsize=14)
    axes[0].text(-0.55, 3.05, "查询头", fontsize=14, ha="left", va="center", color="#555555")
    axes[0].text(-0.55, -0.3, "键值头（进 KV 缓存）", fontsize=14, ha="left", va="top", color="#555555")
    save(fig, path)


def write_kv_cache(path: Path) -> None:
    """Decoding step t = 5: only x_5 is projected; k_5, v_5 join the cache; q_5 reads all five."""
    t = 5
    # Slide size, as for the variants figure: about 11.5 inches wide once cropped, text 15 pt and up.
    fig, ax = plt.subplots(figsize=(14.85, 4.8))
    ax.set_xlim(-1.7, 10.6)
    ax.set_ylim(-0.2, 3.7)
    ax.axis("off")
    xs = [1.2 * i for i in range(t)]

    # Tokens at the bottom: the earlier ones are not looked at again.
    for i, x in enumerate(xs):
        new = i == t - 1
        _box(ax, x, 0.2, 0.8, 0.5, f"$x_{i + 1}$", face=(NEW + "33") if new else "white",
             edge=NEW if new else "#AAAAAA", fontsize=17, color=EDGE if new else "#888888")
    ax.text(-1.6, 0.2, "词元", fontsize=16, va="center")

    # Key and value caches: t-1 stored columns plus the new one.
    for y, name in ((1.75, "k"), (2.85, "v")):
        for i, x in enumerate(xs):
            new = i == t - 1
            _box(ax, x, y, 0.8, 0.55, f"$\\mathbf{{{name}}}_{i + 1}$", face=(NEW + "55") if new else GREY,
                 edge=NEW if new else EDGE, fontsize=17)
        ax.add_patch(Rectangle((xs[0] - 0.55, y - 0.42), xs[-2] - xs[0] + 1.1, 0.84, fill=False,
                               linestyle="--", edgecolor="#777777", linewidth=1.0))
        ax.text(-1.6, y, ("K" if name == "k" else "V") + " 缓存", fontsize=16, va="center")
    ax.text((xs[0] + xs[-2]) / 2, 3.45, "前 t−1 步存下的键和值：不再重算", ha="center", fontsize=15,
            color="#555555")

    # Only the new token is projected: W_k, W_v into the caches, W_q into the one query of this step.
    k_y, v_y = 1.75, 2.85
    _arrow(ax, (xs[-1], 0.47), (xs[-1], k_y - 0.3), color=NEW, lw=2)
    ax.text(xs[-1] + 0.12, 0.95, "$\\mathbf{W}_k,\\mathbf{W}_v$", fontsize=15, color=NEW, va="center")
    q_x = 8.2
    _box(ax, q_x, k_y, 0.9, 0.6, "$\\mathbf{q}_5$", face=NEW + "55", edge=NEW, fontsize=19)
    _arrow(ax, (xs[-1] + 0.42, 0.3), (q_x - 0.2, k_y - 0.32), color=NEW, lw=2)
    ax.text(7.0, 0.6, "$\\mathbf{W}_q$", fontsize=15, color=NEW, va="center")
    _arrow(ax, (q_x - 0.47, k_y), (xs[-1] + 0.45, k_y), lw=2)
    ax.text(6.45, k_y + 0.12, "评分：t 个键", ha="center", va="bottom", fontsize=15)
    _box(ax, q_x, v_y, 0.9, 0.55, "输出", face="white", fontsize=16)
    _arrow(ax, (xs[-1] + 0.45, v_y), (q_x - 0.47, v_y), lw=2)
    ax.text(6.45, v_y + 0.12, "对 t 个值加权", ha="center", va="bottom", fontsize=15)
    ax.text(9.0, 0.2, "旧的查询 $\\mathbf{q}_1,\\dots,\\mathbf{q}_4$\n以后用不到：不缓存", ha="center",
            va="center", fontsize=15, color="#555555")
    save(fig, path)


FIGURES = {
    "gqa-variants.svg": write_variants,
    "gqa-kv-cache.svg": write_kv_cache,
}
