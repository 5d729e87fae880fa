"""Figures in the course's style: attention heatmaps and Chinese labels."""
from collections.abc import Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import seaborn as sns

from .fonts import setup_cjk_font

CMAP = "Reds"

# Type sizes (pt) for a lecture hall: tick labels and legends stay at 12 pt or more on a projected slide even
# where the offline slides shrink a picture slightly (reveal.js draws them at 0.96). Plots in the decks are
# drawn at their natural size, about 10.8 inches (1080 px) wide, which is 80% or more of a 1280-px slide.
FONT_SIZES = {"font.size": 14, "axes.titlesize": 15, "axes.labelsize": 14, "xtick.labelsize": 13,
              "ytick.labelsize": 13, "legend.fontsize": 13, "legend.title_fontsize": 13}
LINES = {"lines.linewidth": 2.0, "lines.markersize": 7.0}


def use_course_style() -> None:
    """Seaborn theme with type large enough for a lecture hall, CJK font, and SVG text as paths (renders
    without the font installed)."""
    sns.set_theme(style="white", context="notebook", rc={**FONT_SIZES, **LINES})
    setup_cjk_font()  # after set_theme, which resets the font list
    matplotlib.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "attncourse",
                                "figure.dpi": 100, "savefig.bbox": "tight"})


def show_heatmaps(matrices: Any, xlabel: str = "键", ylabel: str = "查询", titles: Sequence[str] | None = None,
                  figsize: tuple[float, float] = (3.0, 3.0), cmap: str = CMAP, annot: bool = False,
                  vmin: float = 0.0, vmax: float | None = None) -> Any:
    """Attention weights as a grid of heatmaps.

    `matrices` has shape (rows, cols, queries, keys), as in `d2l.show_heatmaps`; `titles` names each
    column. Returns the matplotlib figure.
    """
    import torch  # here: `course report` uses this module's style without torch
    use_course_style()
    matrices = torch.as_tensor(matrices).detach().float().cpu()
    if matrices.dim() != 4:
        raise ValueError(f"matrices 应为 4 维 (行, 列, 查询, 键)，实际形状为 {tuple(matrices.shape)}")
    rows, cols = matrices.shape[:2]
    vmax = float(matrices.max()) if vmax is None else vmax
    fig, axes = plt.subplots(rows, cols, figsize=(figsize[0] * cols, figsize[1] * rows),
                             sharex=True, sharey=True, squeeze=False)
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            sns.heatmap(matrices[i, j].numpy(), ax=ax, cmap=cmap, vmin=vmin, vmax=vmax, annot=annot,
                        fmt=".2f", cbar=(j == cols - 1), square=False, linewidths=0.3, linecolor="white")
            if i == rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles and i == 0:
                ax.set_title(titles[j])
    fig.tight_layout()
    return fig
